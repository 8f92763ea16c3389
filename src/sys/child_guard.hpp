#pragma once

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>

#include "sys/unique_fd.hpp"

namespace pysandbox::sys {

// Owns a child through its pidfd: whatever happens in the supervisor (an exception included),
// the child is killed and reaped before the guard goes away. Killing the sandbox's init kills
// its whole PID namespace.
//
// A process forked by a zygote is not this process's child: its parent (the zygote) reaps it.
// Its guard kills it the same way; reaping it is noting that it ended (its pidfd is readable),
// without a wait status.
class ChildGuard {
  public:
    enum class Parent { self, other };
    ChildGuard(int pidfd, pid_t pid, Parent parent = Parent::self) noexcept
        : pidfd_(pidfd), pid_(pid), parent_(parent) {}
    ChildGuard(const ChildGuard&) = delete;
    ChildGuard& operator=(const ChildGuard&) = delete;
    ~ChildGuard() {
        if (reaped_) return;
        kill(SIGKILL);
        reap();
    }

    void kill(int sig) noexcept {
        if (!reaped_) ::syscall(SYS_pidfd_send_signal, pidfd_.get(), sig, nullptr, 0);
    }

    // Waits for the child (it must have exited or be about to) and returns its status (none for a
    // process of another parent).
    siginfo_t reap() noexcept {
        siginfo_t info{};
        if (parent_ == Parent::other) {
            reaped_ = true;
            return info;
        }
        while (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &info, WEXITED) < 0 &&
               errno == EINTR) {
        }
        reaped_ = true;
        return info;
    }

    int pidfd() const noexcept { return pidfd_.get(); }
    pid_t pid() const noexcept { return pid_; }
    bool reaped() const noexcept { return reaped_; }

  private:
    UniqueFd pidfd_;
    pid_t pid_;
    Parent parent_;
    bool reaped_ = false;
};

}  // namespace pysandbox::sys
