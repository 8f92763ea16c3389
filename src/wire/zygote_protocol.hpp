#pragma once
// What the supervisor and a zygote's helper (inside/zygote_helper.cpp, inside the zygote's sandbox)
// say to each other over the zygote's channel, a SOCK_SEQPACKET pair at kControlFd: fixed-size
// records, some carrying descriptors (sys/records.hpp). One request is answered before the next
// is sent, so neither side ever has more than one record in flight.
//
//   zygote -> supervisor   Ready + the zygote's pidfd, once, when the preload is imported and
//                          the helper configured (or with an error: the zygote then exits)
//   supervisor -> zygote   SpawnRequest + the job's ends of its pipes (ChildFds without the
//                          release pipe, which the zygote makes)
//   zygote -> supervisor   SpawnReply + the job's pidfd when it was forked
//
// The job's plan reaches the helper once, before any request: the zygote reads it from a file of
// its sandbox (job_spec.hpp) and passes it to the helper's configure().

#include <cstdint>
#include <string_view>

namespace pysandbox::zygote {

inline constexpr std::uint32_t kMagic = 0x7a79676f;  // "zygo"

// Which of the optional ends a request carries, in this order after the four always sent
// (report, stdin, stdout, stderr).
enum FdFlags : std::uint32_t { kPolicyEnd = 1, kControlEnd = 2 };

struct Ready {
    std::uint32_t magic = kMagic;
    std::int32_t error = 0;  // 0, or the errno of what failed (detail says what)
    char detail[256] = {};
};

struct SpawnRequest {
    std::uint32_t magic = kMagic;
    std::uint32_t fds = 0;  // FdFlags
};

struct SpawnReply {
    std::uint32_t magic = kMagic;
    std::int32_t error = 0;  // 0: forked, the pidfd comes with the reply
    std::int32_t pid = 0;    // in the zygote's PID namespace (for messages only)
    char detail[256] = {};
};

// The helper is a CPython extension module of this name (inside/zygote_helper.cpp), in the
// file kZygoteHelperFile: configure(spec) reads the job plan (JSON text, job_spec.hpp) and
// returns the jobs' environment; serve(channel) says Ready, then serves requests until the
// channel closes (0) or fails (-errno), and returns 1 in a job: in its interpreter's process,
// every layer in place, the job's channel at kControlFd.
inline constexpr std::string_view kHelperModule = "pysandbox_zygote_helper";

// The audit event (PEP 578) a forked job's interpreter raises first: the [policy] hook, which
// the zygote installed for its jobs, then reports on the job's own channel
// (src/python/sitecustomize.py, which spells it out).
inline constexpr std::string_view kForkedEvent = "pysandbox.forked";

}  // namespace pysandbox::zygote
