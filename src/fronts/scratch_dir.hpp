#pragma once
// A front's own temporary directory on the host, for what its calls leave (the MCP server's
// artifacts when no --output-dir was given). Removed when the front exits; a front killed before
// it could remove it leaves it behind, so each new one first reaps those whose owner is gone.
//
// A scratch directory is $TMPDIR/pysandbox-<front>-XXXXXX, mode 0700, holding `.owner` (a file
// its front keeps flock'd while it lives) and `files/` (what callers are given). A directory is
// reaped only when all of these hold: its name has the front's prefix, it is a directory (not a
// link) of the caller's uid, it holds `.owner`, and that lock can be taken. A front still making
// its directory holds the lock before `.owner` has that name, so it is never taken for dead.

#include <string>
#include <string_view>

#include "sys/unique_fd.hpp"

namespace pysandbox {

class ScratchDir {
  public:
    // Reaps the stale directories of `front` (e.g. "mcp"), then makes this one. Throws SysError.
    explicit ScratchDir(std::string_view front);
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    ~ScratchDir();

    // Where callers' files go: `files/` inside the directory.
    const std::string& files() const { return files_; }

  private:
    std::string path_;
    std::string files_;
    sys::UniqueFd owner_;  // `.owner`, flock'd while this front lives
};

// Removes every scratch directory of `front` under `parent` whose front is gone, as ScratchDir's
// constructor does; returns how many. Exposed for tests.
int reap_stale_scratch(const std::string& parent, std::string_view front);

}  // namespace pysandbox
