#pragma once
// One live sandbox: cloned into fresh namespaces (and the run's cgroup), its id maps written,
// released; then kept going by watchers in its owner's poll loop (its reports, denied system calls,
// the audit hook's channel, the cell driver's channel, its output) until nothing of it is left.
// It decides nothing about time: the front that owns it (run's deadline, a session's cell
// timeout, a server's cancellation) signals or kills it, and says why when it takes the outcome.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "engine/control_channel.hpp"
#include "engine/stream.hpp"
#include "engine/syscall_watch.hpp"
#include "plan/plan.hpp"
#include "proxy/proxy.hpp"
#include "report/outcome.hpp"
#include "sys/cgroup.hpp"
#include "sys/child_guard.hpp"
#include "sys/poller.hpp"
#include "sys/timer_fd.hpp"
#include "sys/unique_fd.hpp"
#include "wire/report.hpp"

namespace pysandbox {

class PolicyChannel;
class Zygote;
class ZygoteLife;

// What a finished sandbox hands over: the outcome and the resources collection needs.
struct Supervised {
    Outcome outcome;         // how it ended, output, usage, denied calls, the hook's records
    sys::UniqueFd work_dir;  // the sandbox's /tmp/work, handed over during setup
    std::unique_ptr<proxy::Proxy> proxy;        // network mode "proxy", once it was opened
    std::unique_ptr<cgroup::RunCgroup> cgroup;  // when memory and processes had one
    std::int64_t start_realtime_ns = 0;         // CLOCK_REALTIME before the sandbox started
    // When the script's time ended: its deadline when it timed out (Ending::due), else when
    // pysandbox saw the sandbox end; none when it was not taken from a running sandbox.
    std::optional<std::chrono::steady_clock::time_point> ended;
};

// Why the owner ended the sandbox, when it did.
struct Ending {
    bool timed_out = false;  // a deadline passed (the run's, a cell's)
    int interrupted_by = 0;  // the signal pysandbox got and passed on
    // When that deadline was due: however late a busy machine let pysandbox act on it, the
    // script's time ended then, and collection's budget counts from there (collect.hpp).
    std::optional<std::chrono::steady_clock::time_point> due;
};

// A cell's output, cut from the streams: the bytes when they were captured, and the counts.
struct CutOutput {
    std::optional<Outcome::Captured> captured;
    std::string stderr_tail;  // uncaptured: the last of stderr as it passed (Outcome's)
    std::uint64_t stdout_bytes = 0;
    std::uint64_t stderr_bytes = 0;
    std::uint64_t stdout_omitted = 0;
    std::uint64_t stderr_omitted = 0;
    bool stdout_reader_gone = false;
};

class Sandbox {
  public:
    // Starts the plan's sandbox; its watchers join `poller`. The plan must outlive it. Throws
    // UserNamespaceError or SysError when the sandbox cannot even be created (clone3, id maps).
    //
    // The script's stdin: the program given on stdin, else pysandbox's own stdin when it may read
    // it; for the cell driver, nothing until feed_stdin().
    Sandbox(const Plan& plan, sys::Poller& poller);
    // The same sandbox, forked by `zygote` (zygote.hpp) from its warm interpreter instead of
    // cloned: the plan must be the one the zygote was made for. Throws SysError when the zygote
    // cannot fork it.
    Sandbox(const Plan& plan, sys::Poller& poller, Zygote& zygote);
    // Kills and reaps what is left, and leaves the poller.
    ~Sandbox();
    Sandbox(const Sandbox&) = delete;
    Sandbox& operator=(const Sandbox&) = delete;

    // Its init has not been reaped.
    bool running() const { return !child_->reaped(); }
    // Nothing of it is left: init reaped, the reports, the hook's channel and the output drained.
    bool finished() const;
    // Forked by a zygote that has ended: it is dying with it, whatever it shows yet.
    bool orphaned() const;
    // To its init, which passes SIGINT, SIGTERM, SIGHUP and SIGQUIT on to the script.
    void signal(int sig) { child_->kill(sig); }
    void kill() { child_->kill(SIGKILL); }
    // The interpreter's own usage so far, read from /proc: CPU time (its children's that it
    // waited for included) and, with `peak`, peak resident memory (else 0: /proc's status costs
    // a cell's start more than its stat). Under gVisor, where the interpreter is runsc, that of
    // every process under runsc (its sentry, the ptrace stubs): CPU time summed, the largest
    // peak. None once it is gone.
    struct Usage {
        std::int64_t cpu_ms = 0;
        std::int64_t max_rss_kib = 0;
    };
    std::optional<Usage> interpreter_usage(bool peak = true);

    // The cell driver's channel (plan.program_kind == driver), else null.
    ControlChannel* control() { return control_.get(); }
    // A zygote's channel (plan.program_kind == zygote): the supervisor's end of a SOCK_SEQPACKET
    // pair whose other end the zygote holds at kControlFd (zygote_protocol.hpp). Taken once.
    sys::UniqueFd take_zygote_channel() { return std::move(zygote_channel_); }
    // The sandbox's /tmp/work once setup sent it, else -1; the proxy once it was opened.
    int work_dir() const { return work_dir_.get(); }
    proxy::Proxy* proxy() { return proxy_.get(); }
    cgroup::RunCgroup* cgroup() { return cgroup_.get(); }

    // The driver's stdin: `content`, then end of file. Once.
    void feed_stdin(std::string content);

    // The output since the last cut, after reading what the pipes already hold (what the driver
    // wrote before it said a cell was done is there); the next cell's output budget starts
    // afresh.
    CutOutput cut_output();
    // Captured output (plan.capture_output) is shown to `observer` as it is kept, until another
    // is set (an empty one: none). Without one, nothing is copied for it.
    void observe_output(OutputObserver observer) { observer_ = std::move(observer); }
    // Output read but not yet written to pysandbox's own stdout or stderr (passed through).
    bool output_pending() const;
    // Denied calls, the allocation evidence and the hook's records since the last take.
    void take_blocks(Outcome& outcome);

    // Once finished(): what was seen. `ending` is the owner's reason, if it ended it.
    Supervised take(Ending ending);

  private:
    struct Pipes;

    Sandbox(const Plan& plan, sys::Poller& poller, Zygote* zygote);
    void clone_child(Pipes& pipes, int control_end);

    void watch(sys::Poller& poller);
    void watch_stream(std::optional<Stream>& stream, sys::Poller& poller);
    void open_streams(Pipes& pipes);
    void rewrite_traceback_paths();
    void on_report();
    void on_notification();
    void on_cpu_watch();
    Outcome outcome(Ending ending) const;

    const Plan& plan_;
    sys::Poller& poller_;
    std::chrono::steady_clock::time_point start_;
    std::int64_t start_realtime_ns_ = 0;
    std::unique_ptr<cgroup::RunCgroup> cgroup_;
    std::unique_ptr<PolicyChannel> policy_;
    std::unique_ptr<ControlChannel> control_;
    std::optional<sys::ChildGuard> child_;
    sys::UniqueFd report_;
    policy::Records policy_records_;
    OutputBudget budget_;  // shared by stdout and stderr; renewed at each cut
    Transcript transcript_;
    OutputObserver observer_;  // the captured streams point to it
    std::optional<Stream> input_;
    std::optional<Stream> out_;
    std::optional<Stream> err_;
    sys::UniqueFd stdin_write_;  // the driver's stdin, until feed_stdin()
    sys::UniqueFd zygote_channel_;
    std::shared_ptr<ZygoteLife> zygote_;  // a forked sandbox's zygote lives as long as it does
    siginfo_t init_status_{};
    std::optional<Report> exited_;
    std::optional<Report> failure_;
    sys::UniqueFd work_dir_;
    sys::UniqueFd notify_;
    SyscallWatch syscalls_;
    std::unique_ptr<proxy::Proxy> proxy_;
    sys::UniqueFd interpreter_;  // its /proc directory, once found: bound to that process
    // sandbox.kernel = "gvisor": the CPU-time limit, which the supervisor enforces over runsc's
    // processes (on_cpu_watch). Their CPU time once runsc had started the script's container
    // (runsc's own start, which the limit does not count), and that at which it was reached.
    std::optional<sys::TimerFd> cpu_watch_;
    std::optional<std::int64_t> cpu_baseline_ms_;
    std::optional<std::int64_t> cpu_limit_reached_ms_;
};

}  // namespace pysandbox
