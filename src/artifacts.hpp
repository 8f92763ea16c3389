#pragma once
// Artifacts: the regular files a run left under /tmp/work, found through a descriptor of that
// directory the sandbox handed over during setup (it keeps the tmpfs alive after the sandbox is
// gone), hashed, and with --output-dir copied to the host. Nothing here follows a symbolic link
// or opens anything but a regular file: the tree was written by the untrusted script.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pysandbox::artifacts {

struct Artifact {
    std::string path;  // relative to /tmp/work, '/'-separated
    std::uint64_t size = 0;
    std::optional<std::string> sha256;  // none when the hashing budget ran out
    std::string media_type;
    std::optional<std::string> host_path;  // where --output-dir put it
    std::string skipped;  // why it was not copied: exists, too_large, total_limit, error
};

// Options::output_dir when nothing is copied, and when copying was asked for but the host
// directory could not be opened (every file is then reported "skipped": "error").
inline constexpr int kListOnly = -1;
inline constexpr int kHostDirMissing = -2;

struct Options {
    std::vector<std::string> inputs;  // top-level names bound by --input: never artifacts
    // CLOCK_REALTIME: a file whose mtime is not later is not an artifact; none: every file is.
    std::optional<std::int64_t> modified_after_ns;
    int output_dir = kListOnly;        // an open host directory, or one of the above
    std::string output_dir_path;       // for host_path
    std::uint64_t max_file_size = 0;   // per file copied
    std::uint64_t max_total_size = 0;  // all files copied
};

// The media type a file's extension suggests; application/octet-stream when none does.
std::string media_type_for(std::string_view name);

// Walks the directory `work_dir` (bounded in depth, entries and bytes read), in name order.
std::vector<Artifact> collect(int work_dir, const Options& options);

}  // namespace pysandbox::artifacts
