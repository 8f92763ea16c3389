#include "engine/policy_channel.hpp"

#include <sys/socket.h>

#include <cerrno>

#include "sys/errors.hpp"
#include "sys/records.hpp"

namespace pysandbox {
namespace {

// A record is "kind\twhat" with `what` at most 200 characters (sitecustomize.py): anything
// longer is not the hook's and is dropped whole (MSG_TRUNC).
constexpr std::size_t kMaxRecord = 512;
constexpr int kRecordsPerDrain = 256;

}  // namespace

PolicyChannel::PolicyChannel() {
    int fds[2];
    check_sys(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds),
              "socketpair(AF_UNIX, SOCK_SEQPACKET) for the policy channel");
    read_.reset(fds[0]);
    write_.reset(fds[1]);
    // The supervisor only reads; nothing it could send would reach anyone but the script.
    check_sys(::shutdown(read_.get(), SHUT_WR), "shutdown(policy channel, SHUT_WR)");
    // Every record then carries its sender's credentials, an empty one included: the end of the
    // channel is the one read of 0 bytes that carries none.
    const int on = 1;
    check_sys(::setsockopt(read_.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on),
              "setsockopt(policy channel, SO_PASSCRED)");
}

PolicyChannel::Drained PolicyChannel::drain(policy::Records& records) {
    char record[kMaxRecord];
    for (int i = 0; i < kRecordsPerDrain; ++i) {
        const auto [n, ended, sent] =
            sys::receive_untrusted(read_.get(), record, sizeof record, MSG_DONTWAIT);
        if (n < 0) return errno == EINTR ? Drained::more : Drained::empty;
        if (ended) return Drained::closed;
        if (n > 0 && static_cast<std::size_t>(n) <= sizeof record)
            records.add(std::string_view(record, static_cast<std::size_t>(n)));
    }
    return Drained::more;
}

}  // namespace pysandbox
