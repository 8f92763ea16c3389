#pragma once
// Artifacts: the regular files a run left under /tmp/work, found through a descriptor of that
// directory the sandbox handed over during setup (it keeps the tmpfs alive after the sandbox is
// gone), hashed, and with --output-dir copied to the host. Nothing here follows a symbolic link
// or opens anything but a regular file: the tree was written by the untrusted script.
//
// The walk is bounded in what it costs the caller, whatever the script left: entries walked,
// artifacts listed, bytes read (hashing and copying together, counted in bytes actually read),
// bytes per file, and time (a deadline after which files are listed without a hash, uncopied).
// On the host, an artifact lands only in a directory this walk created, or in the top of the
// output directory, which the plan found empty or absent.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "report/artifact.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox::artifacts {

// Options::output_dir when nothing is copied, and when copying was asked for but the host
// directory could not be opened (every file is then reported "skipped": "error").
inline constexpr int kListOnly = -1;
inline constexpr int kHostDirMissing = -2;
// Options::output_dir when it is made as the walk first needs it (Options::make_output_dir).
inline constexpr int kHostDirLater = -3;

// At most this many artifacts are listed; the rest are only counted (Listing::omitted).
inline constexpr std::size_t kMaxListed = 1000;

// What a regular file was when a walk saw it: a file whose stamp is unchanged was not written
// since (a session lists only what each cell changed).
struct Stamp {
    ino_t inode = 0;
    off_t size = 0;
    std::int64_t mtime_ns = 0;
    std::int64_t ctime_ns = 0;
    bool operator==(const Stamp&) const = default;
};
using Snapshot = std::map<std::string, Stamp>;  // path -> stamp

struct Options {
    std::vector<std::string> inputs;   // top-level names bound by --input: never artifacts
    int output_dir = kListOnly;        // an open host directory, or one of the above
    std::string output_dir_path;       // for host_path
    std::uint64_t max_file_size = 0;   // per file hashed or copied
    std::uint64_t max_total_size = 0;  // bytes read for hashing and copying, all files together
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
    std::optional<uid_t> owner;  // chown copies to this uid/gid (root's runs: the sandbox's)
    std::optional<gid_t> group;
    // Files with the same stamp as here are left out (not listed, hashed or copied).
    const Snapshot* unchanged = nullptr;
    // With kHostDirLater: makes and opens the output directory, or returns kHostDirMissing. Called
    // once, when the walk first has a file to list or a directory to enter: a session's cell that
    // left nothing new costs no directory made and removed on the host.
    std::function<int()> make_output_dir;
};

struct Listing {
    std::vector<Artifact> files;
    std::uint64_t omitted = 0;  // regular files past kMaxListed
    Snapshot seen;              // every regular file the walk saw, for the next walk's `unchanged`
};

// The media type a file's extension suggests; application/octet-stream when none does.
std::string media_type_for(std::string_view name);

// Makes the host directory `name` under `parent` (a directory descriptor, or AT_FDCWD and a path)
// and opens it, never through a link; it belongs to `owner` and `group` when given. Null, errno
// set, when it is there already or cannot be made. Every directory artifacts are copied into (the
// output directory, a session cell's, the walk's subdirectories) is made by this.
sys::UniqueFd make_host_dir(int parent, const std::string& name, std::optional<uid_t> owner = {},
                            std::optional<gid_t> group = {});

// --output-runs: makes and opens the next run-N under `parent` (N one more than the highest
// there; on a race with another run, the next free one), as make_host_dir does. Its name goes
// to `name`. Null, errno set, when none can be made.
sys::UniqueFd make_run_dir(int parent, std::string& name);

// Walks the directory `work_dir` (bounded in depth, entries, bytes and time), in name order.
Listing collect(int work_dir, const Options& options);

}  // namespace pysandbox::artifacts
