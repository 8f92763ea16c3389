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
// its sandbox (job_spec.hpp) and passes it to pysandbox_zygote_configure().

#include <cstdint>

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

// The helper's entry points (inside/zygote_helper.cpp), as the zygote calls them through ctypes.
extern "C" {
// Reads the job plan (JSON text, job_spec.hpp) and opens what every job takes from the zygote.
// 0, or -errno with `error` (of `error_size` bytes) saying what failed.
int pysandbox_zygote_configure(const char* spec, std::size_t size, char* error,
                               std::size_t error_size);
// Says Ready, then serves requests on `channel` until it closes (returns 0) or fails (-errno).
// Returns 1 in a job: in its interpreter's process, every layer in place, the job's channel at
// kControlFd; the caller goes on as the job's cell driver.
int pysandbox_zygote_serve(int channel);
}

}  // namespace pysandbox::zygote
