#pragma once

#include <signal.h>
#include <sys/signalfd.h>

#include <initializer_list>

#include "sys/unique_fd.hpp"

namespace pysandbox::sys {

// The signals that end pysandbox's work in every front: `run` passes them on to its script
// (engine/run_watch.cpp), the fronts that hold many sandboxes end them all (fronts/front_loop.hpp).
inline constexpr std::initializer_list<int> kStopSignals{SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// Blocks the given signals and delivers them through a descriptor; restores the mask on
// destruction.
class SignalFd {
  public:
    explicit SignalFd(std::initializer_list<int> signals) {
        sigemptyset(&mask_);
        for (int sig : signals) sigaddset(&mask_, sig);
        check_sys(::sigprocmask(SIG_BLOCK, &mask_, &previous_), "sigprocmask(SIG_BLOCK)");
        fd_ = UniqueFd(check_sys(::signalfd(-1, &mask_, SFD_CLOEXEC | SFD_NONBLOCK), "signalfd"));
    }
    SignalFd(const SignalFd&) = delete;
    SignalFd& operator=(const SignalFd&) = delete;
    ~SignalFd() { ::sigprocmask(SIG_SETMASK, &previous_, nullptr); }

    // The next pending signal, or 0.
    int take() noexcept {
        signalfd_siginfo info{};
        if (::read(fd_.get(), &info, sizeof info) != sizeof info) return 0;
        return static_cast<int>(info.ssi_signo);
    }

    int get() const noexcept { return fd_.get(); }

  private:
    sigset_t mask_{};
    sigset_t previous_{};
    UniqueFd fd_;
};

}  // namespace pysandbox::sys
