#pragma once

#include <limits.h>
#include <sys/stat.h>

#include <cstddef>

namespace pysandbox::sys {

// How much may be written to `fd` after poll() said POLLOUT without blocking: at most PIPE_BUF to
// a pipe or terminal; more to a regular file, which is always writable.
inline std::size_t write_size_after_pollout(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) return 64 * 1024;
    return PIPE_BUF;
}

}  // namespace pysandbox::sys
