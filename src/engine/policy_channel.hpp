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

class PolicyChannel {
  public:
    // Throws SysError.
    PolicyChannel();

    int fd() const { return read_.get(); }
    // The interpreter's end; the supervisor closes its copy once the child has one.
    int write_fd() const { return write_.get(); }
    void close_write_end() { write_.reset(); }

    // Reads the records that are waiting into `records`, at most a bounded number per call so
    // that a flood cannot hold up the supervisor's loop.
    enum class Drained { more, empty, closed };
    Drained drain(policy::Records& records);

  private:
    sys::UniqueFd read_;
    sys::UniqueFd write_;
};

}  // namespace pysandbox
