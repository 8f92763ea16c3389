#pragma once
// The audit hook's way out: a SOCK_SEQPACKET socket pair. The interpreter holds one end at
// kPolicyFd; the supervisor drains the other while the script runs. Each write is one record the
// socket keeps whole, so what the hook wrote cannot be erased, rewritten or glued to the script's
// own bytes afterwards: the script can add junk records (they are ignored, and bounded), or stop
// reporting by closing its end, never take back what was sent.

#include "plan/policy.hpp"
#include "sys/unique_fd.hpp"
#include "wire/fds.hpp"

namespace pysandbox {

//
// Under gVisor (plan/gvisor.hpp) the interpreter inherits no descriptor, so the channel is
// `listening`: one unbound SOCK_SEQPACKET socket, which the sandbox's setup binds at
// kGvisorPolicySocket and listens on (inside/mounts.cpp), and the hook connects to before the
// script runs. The supervisor takes the first connection, the hook's, and closes the listener:
// any later connect is refused, and the records are again datagrams only the supervisor reads.
class PolicyChannel {
  public:
    enum class Mode { pair, listening };
    // Throws SysError.
    explicit PolicyChannel(Mode mode = Mode::pair);

    // What to poll: the read end or the connection while open; while listening, the listener
    // once the sandbox listens on it (before, a socket not listening polls as hung up); else -1.
    int fd();
    // The child's end (the socket to bind and listen on, when listening); the supervisor closes
    // its copy of a pair's once the child has one.
    int write_fd() const { return write_ ? write_.get() : listener_.get(); }
    void close_write_end() { write_.reset(); }
    // Whether a writer may still send: until the channel is closed, or a listening one's
    // sandbox is gone (sandbox_gone) without a connection.
    bool open() const { return open_; }
    // Everything in the sandbox has exited (its init is reaped): a listening channel takes the
    // connection still waiting, if any, and else closes, as nobody is left to connect.
    void sandbox_gone();

    // Reads the records that are waiting into `records`, at most a bounded number per call so
    // that a flood cannot hold up the supervisor's loop.
    enum class Drained { more, empty, closed };
    Drained drain(policy::Records& records);

  private:
    // Takes the hook's connection, when it is waiting; then no other.
    void accept_connection();

    sys::UniqueFd read_;
    sys::UniqueFd write_;
    sys::UniqueFd listener_;
    bool listens_ = false;
    bool open_ = false;
};

}  // namespace pysandbox
