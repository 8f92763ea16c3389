#pragma once
// What the inside tells the supervisor, over one close-on-exec socket (a SOCK_SEQPACKET
// socketpair, so a record can carry a descriptor): fixed-size records, each written with one
// write() and read as one whole message, never split or interleaved.

#include <climits>
#include <cstdint>

namespace pysandbox {

enum class ReportKind : std::uint32_t {
    setup_failed = 1,    // a child step failed: step, error, detail
    exec_failed = 2,     // execve of the interpreter failed: error, detail
    exited = 3,          // the script ended: wait_status and its usage
    listener = 4,        // carries the seccomp user-notification fd (SCM_RIGHTS)
    proxy_listener = 5,  // carries the proxy's listening socket, bound inside (SCM_RIGHTS)
    work_dir = 6,        // carries an open /tmp/work, for the artifacts (SCM_RIGHTS)
};

struct Report {
    ReportKind kind{};
    std::int32_t step = -1;
    std::int32_t error = 0;
    std::int32_t wait_status = 0;
    std::int64_t cpu_us = 0;
    std::int64_t max_rss_kib = 0;
    std::int64_t exec_mono_ns = 0;  // CLOCK_MONOTONIC just before execve: setup ends here
    char detail[256] = {};
};
static_assert(sizeof(Report) <= PIPE_BUF, "a report must be written atomically");

}  // namespace pysandbox
