#pragma once

#include <fcntl.h>
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

// Grows the pipe behind `fd` to `bytes` (the unprivileged maximum is 1 MiB) when it is smaller:
// pysandbox sits between the script and the caller's pipe, and moving a megabyte per wake-up
// instead of 64 KiB takes that hop off the critical path. The caller's reader sees no
// difference but fewer, larger reads. Best effort: a pipe the kernel will not grow (the user's
// pipe buffer quota) stays as it is.
inline void grow_pipe(int fd, int bytes = 1 << 20) {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return;
    if (const int size = ::fcntl(fd, F_GETPIPE_SZ); size >= 0 && size < bytes)
        ::fcntl(fd, F_SETPIPE_SZ, bytes);
}

}  // namespace pysandbox::sys
