#include "engine/run_watch.hpp"

#include <grp.h>
#include <sched.h>
#include <signal.h>

#include <chrono>

#include "sys/errors.hpp"
#include "sys/poller.hpp"
#include "sys/signal_fd.hpp"
#include "sys/timer_fd.hpp"

namespace pysandbox {
namespace {

// How long a script interrupted by a signal may take to wind down before it is killed.
constexpr std::chrono::seconds kInterruptGrace{2};

// The run's deadline and the signals pysandbox gets, around one sandbox.
class RunWatch {
  public:
    RunWatch(Sandbox& sandbox, sys::SignalFd& signals, sys::Poller& poller)
        : sandbox_(sandbox), signals_(signals) {
        using Interest = sys::Poller::Interest;
        // After the sandbox's own watchers: in a round where the script ended and the deadline
        // passed, the end is seen first, and a script that finished is not a timeout.
        poller.watch(
            [this] {
                return Interest{deadline_.get(), POLLIN};
            },
            [this](short) { on_deadline(); });
        poller.watch(
            [this] {
                return Interest{signals_.get(), POLLIN};
            },
            [this](short) { on_signal(); });
    }

    void arm(std::chrono::milliseconds wall_time) {
        due_ = std::chrono::steady_clock::now() + wall_time;
        deadline_.arm(wall_time);
    }
    Ending ending() const { return ending_; }

  private:
    void on_deadline() {
        deadline_.acknowledge();
        if (!sandbox_.running()) return;
        if (!ending_.interrupted_by) {
            ending_.timed_out = true;
            ending_.due = due_;
        }
        sandbox_.kill();
    }

    void on_signal() {
        const int sig = signals_.take();
        if (sig == 0 || !sandbox_.running()) return;
        if (ending_.interrupted_by != 0) {  // asked twice: stop waiting for the script
            sandbox_.kill();
            return;
        }
        ending_.interrupted_by = sig;
        sandbox_.signal(sig);  // init passes it to the script (KeyboardInterrupt for SIGINT)
        deadline_.arm(kInterruptGrace);
    }

    Sandbox& sandbox_;
    sys::SignalFd& signals_;
    sys::TimerFd deadline_;
    std::chrono::steady_clock::time_point due_;  // of the wall-clock limit, as armed
    Ending ending_;
};

// Passing output through, the supervisor is woken by every write the script makes to a pipe it
// watches. Woken as a normal task it preempts the script at once, when they share a CPU, and
// moves that one write on (64 KiB of a flood, where a megabyte would fit the pipe): three
// hand-overs per write between the script, the supervisor and the caller's reader instead of
// bare Python's one. As a batch task (sched(7), SCHED_BATCH: the same share of the CPU, no
// preemption on wake-up) it runs when the script blocks or its slice ends, or at once on an idle
// CPU, and moves what piled up: a run printing 100 MiB in 64 KiB writes switched the supervisor
// 500 to 1,200 times, now 140 to 270. The deadline and signals may then wait for the end of
// another task's slice, a few milliseconds on a loaded CPU. Only while the sandbox runs and only
// for output passed through: a --json run printing 100 MiB took 6 to 17 % longer as a batch
// task (its result written at the end waits a tick at each wake-up). Only from the
// caller's normal policy (not one it chose: real-time, idle), and after the clone: the script
// keeps the caller's policy.
class BatchScheduling {
  public:
    explicit BatchScheduling(bool wanted) {
        const sched_param none{};
        active_ = wanted && ::sched_getscheduler(0) == SCHED_OTHER &&
                  ::sched_setscheduler(0, SCHED_BATCH, &none) == 0;
    }
    BatchScheduling(const BatchScheduling&) = delete;
    BatchScheduling& operator=(const BatchScheduling&) = delete;
    ~BatchScheduling() {
        const sched_param none{};
        if (active_) ::sched_setscheduler(0, SCHED_OTHER, &none);  // as it was: any user may
    }

  private:
    bool active_ = false;
};

}  // namespace

Supervised watch_run(const Plan& plan) {
    // Block the forwarded signals before clone so none is lost between clone and the loop; the
    // child's init unblocks what it needs.
    sys::SignalFd signals{sys::kStopSignals};
    // Root's supplementary groups (0 among them) must not follow the script, and nothing inside
    // can drop them once setgroups is denied: drop them here, before clone.
    if (plan.ids.privileged) check_sys(::setgroups(0, nullptr), "setgroups(0, {})");
    sys::Poller poller;
    Sandbox sandbox(plan, poller);
    RunWatch watch(sandbox, signals, poller);
    watch.arm(plan.profile.limits.wall_time);
    {
        const BatchScheduling batch(!plan.capture_output);
        while (!sandbox.finished()) poller.poll_once();
    }
    return sandbox.take(watch.ending());
}

}  // namespace pysandbox
