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

// Every record then carries its sender's credentials, an empty one included: the end of the
// channel is the one read of 0 bytes that carries none.
void pass_credentials(int socket) {
    const int on = 1;
    check_sys(::setsockopt(socket, SOL_SOCKET, SO_PASSCRED, &on, sizeof on),
              "setsockopt(policy channel, SO_PASSCRED)");
}

}  // namespace

PolicyChannel::PolicyChannel(Mode mode) {
    if (mode == Mode::listening) {
        listener_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        check_sys(listener_.get(), "socket(AF_UNIX, SOCK_SEQPACKET) for the policy channel");
        // Before the hook connects: its first records then carry credentials too.
        pass_credentials(listener_.get());
        open_ = true;
        return;
    }
    int fds[2];
    check_sys(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds),
              "socketpair(AF_UNIX, SOCK_SEQPACKET) for the policy channel");
    read_.reset(fds[0]);
    write_.reset(fds[1]);
    // The supervisor only reads; nothing it could send would reach anyone but the script.
    check_sys(::shutdown(read_.get(), SHUT_WR), "shutdown(policy channel, SHUT_WR)");
    pass_credentials(read_.get());
    open_ = true;
}

int PolicyChannel::fd() {
    if (!open_) return -1;
    if (read_) return read_.get();
    if (!listener_) return -1;
    if (!listens_) listens_ = sys::listens(listener_.get());
    return listens_ ? listener_.get() : -1;
}

void PolicyChannel::accept_connection() {
    if (read_ || !listener_ || fd() < 0) return;
    sys::UniqueFd connection(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!connection) return;  // none waiting (EAGAIN): the hook has not connected yet
    // The only descriptor of the listener outside gVisor (the sandbox closed its own): closed,
    // nobody else can connect, whatever the script tries.
    listener_.reset();
    check_sys(::shutdown(connection.get(), SHUT_WR), "shutdown(policy channel, SHUT_WR)");
    pass_credentials(connection.get());
    read_ = std::move(connection);
}

void PolicyChannel::sandbox_gone() {
    if (!listener_) return;
    listens_ = true;  // whether it did or not: a listener that never listened holds nothing
    accept_connection();
    if (!read_) {
        listener_.reset();
        open_ = false;
    }
}

PolicyChannel::Drained PolicyChannel::drain(policy::Records& records) {
    accept_connection();
    if (!read_) return Drained::empty;
    char record[kMaxRecord];
    for (int i = 0; i < kRecordsPerDrain; ++i) {
        const auto [n, ended, sent] =
            sys::receive_untrusted(read_.get(), record, sizeof record, MSG_DONTWAIT);
        if (n < 0) return errno == EINTR ? Drained::more : Drained::empty;
        if (ended) {
            open_ = false;
            return Drained::closed;
        }
        if (n > 0 && static_cast<std::size_t>(n) <= sizeof record)
            records.add(std::string_view(record, static_cast<std::size_t>(n)));
    }
    return Drained::more;
}

}  // namespace pysandbox
