#pragma once
// What the supervisor does with the calls the seccomp filter sends it (SECCOMP_RET_USER_NOTIF):
// a call outside the allowlist is counted by name and refused with the errno a refusing kernel
// gives (or, with action "kill", ends the sandbox); a big allocation is measured against the
// memory limit and let through; with --trace-syscalls every call is recorded and answered as the
// profile's own filter would.

#include <cstdint>
#include <map>
#include <string>

#include "plan/plan.hpp"
#include "report/outcome.hpp"

struct seccomp_notif;
struct seccomp_notif_resp;

namespace pysandbox {

class SyscallWatch {
  public:
    explicit SyscallWatch(const Plan& plan);  // throws SysError
    ~SyscallWatch();
    SyscallWatch(const SyscallWatch&) = delete;
    SyscallWatch& operator=(const SyscallWatch&) = delete;

    // Takes one notification from `listener` and answers it. True when the sandbox must end now
    // (a denied call under action "kill": the call stays unanswered until the kill lands).
    bool handle(int listener);

    // What was seen, into the outcome: denied calls, the killing one, the allocation evidence,
    // the trace.
    void report(Outcome& outcome) const;
    // The same, then the denied calls and the allocation evidence count from zero again (a
    // session reports them per cell).
    void take(Outcome& outcome);
    // The denied call that ended the sandbox under action "kill", or empty.
    const std::string& killing_syscall() const { return killing_syscall_; }

  private:
    bool deny(int listener, const std::string& name);
    void watch_allocation(int listener);
    bool trace(int listener, const std::string& name);
    void answer(int listener, int error, bool let_through);

    const Plan& plan_;
    seccomp_notif* request_ = nullptr;
    seccomp_notif_resp* response_ = nullptr;
    std::size_t request_size_ = 0;
    std::map<std::string, std::uint64_t> blocked_;
    std::string killing_syscall_;
    bool allocation_refused_ = false;
    std::map<std::string, Outcome::TracedCall> traced_;
};

}  // namespace pysandbox
