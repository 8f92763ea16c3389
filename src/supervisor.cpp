#include "supervisor.hpp"

#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "bounded_counts.hpp"
#include "child.hpp"
#include "errors.hpp"
#include "policy_channel.hpp"
#include "report.hpp"
#include "stream.hpp"
#include "sys/child_guard.hpp"
#include "sys/poller.hpp"
#include "sys/records.hpp"
#include "sys/signal_fd.hpp"
#include "sys/timer_fd.hpp"
#include "syscall_watch.hpp"

namespace pysandbox {
namespace {

using Clock = std::chrono::steady_clock;
using sys::UniqueFd;

constexpr std::uint64_t kNamespaces = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
                                      CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
constexpr std::chrono::seconds kInterruptGrace{2};

UniqueFd dup_fd(int fd) {
    return UniqueFd(check_sys(::fcntl(fd, F_DUPFD_CLOEXEC, 3), "fcntl(F_DUPFD_CLOEXEC)"));
}

// Writes of at most PIPE_BUF never block after POLLOUT on a pipe or terminal; regular files and
// devices that are always writable take bigger ones.
std::size_t write_chunk_for(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) return 64 * 1024;
    return PIPE_BUF;
}

// The caller's stdin is pumped unless it is a terminal this process does not own: reading it
// from the background would stop pysandbox with SIGTTIN.
bool may_read_stdin() {
    if (!::isatty(STDIN_FILENO)) return ::fcntl(STDIN_FILENO, F_GETFD) >= 0;
    return ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
}

// The fine clock, not the coarse one file times mostly come from: a file the caller wrote in
// the same tick just before the run has an mtime equal to the coarse time, and on kernels with
// fine-grained timestamps (6.13+) a later one. Either made it an artifact of this run.
std::int64_t realtime_ns() {
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

void write_proc_file(pid_t pid, const char* name, const std::string& content) {
    std::string path = "/proc/" + std::to_string(pid) + "/" + name;
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd ||
        ::write(fd.get(), content.data(), content.size()) != static_cast<ssize_t>(content.size())) {
        const int error = errno;
        throw UserNamespaceError(
            "write(" + path + ", \"" + content.substr(0, content.find('\n')) + "\")", error);
    }
}

void write_id_maps(pid_t pid, const IdMap& ids) {
    // An unprivileged caller may only map itself, and only after giving up setgroups(); root
    // gives it up too, so the script can never regain a group.
    write_proc_file(pid, "setgroups", "deny");
    write_proc_file(pid, "uid_map",
                    std::to_string(ids.inner_uid) + " " + std::to_string(ids.outer_uid) + " 1\n");
    write_proc_file(pid, "gid_map",
                    std::to_string(ids.inner_gid) + " " + std::to_string(ids.outer_gid) + " 1\n");
}

// A SOCK_SEQPACKET pair: records stay whole and can carry a file descriptor.
sys::Pipe report_channel() {
    int fds[2];
    check_sys(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), "socketpair");
    return sys::Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// Bigger output pipes mean fewer wake-ups for a script that prints a lot. Best effort: the
// kernel caps what an unprivileged user may have in pipe buffers.
sys::Pipe output_pipe() {
    sys::Pipe pipe = sys::Pipe::create();
    ::fcntl(pipe.read.get(), F_SETPIPE_SZ, 1 << 20);
    return pipe;
}

struct Pipes {
    sys::Pipe release = sys::Pipe::create();
    sys::Pipe report = report_channel();
    sys::Pipe in = sys::Pipe::create();
    sys::Pipe out = output_pipe();
    sys::Pipe err = output_pipe();
    // Only when the profile has a [policy]. (A unique_ptr: GCC 12's sanitizer build takes an
    // optional of it for a maybe-uninitialized descriptor.)
    std::unique_ptr<PolicyChannel> policy;

    ChildFds child_ends() const {
        return {release.read.get(), report.write.get(), in.read.get(),
                out.write.get(),    err.write.get(),    policy ? policy->write_fd() : -1};
    }
    // The supervisor keeps only its own ends; the child's copies go with it.
    void close_child_ends() {
        release.read.reset();
        report.write.reset();
        in.read.reset();
        out.write.reset();
        err.write.reset();
        if (policy) policy->close_write_end();
    }
};

// The poll loop's state: what the supervisor watches and what it learned.
class Supervision {
  public:
    Supervision(const Plan& plan, sys::ChildGuard& child, sys::SignalFd& signals, Pipes& pipes)
        : plan_(plan),
          child_(child),
          signals_(signals),
          report_(std::move(pipes.report.read)),
          policy_(pipes.policy),
          budget_(OutputBudget::for_limit(plan.profile.limits.output_limit)) {
        open_streams(pipes);
        watch_events();
    }

    void run() {
        deadline_.arm(plan_.profile.limits.wall_time);
        while (!done()) poller_.poll_once();
    }

    // What was seen, once run() returned; the captured output moves into it.
    Outcome take_outcome(Clock::time_point start);
    UniqueFd take_work_dir() { return std::move(work_dir_); }
    std::unique_ptr<proxy::Proxy> take_proxy() { return std::move(proxy_); }

  private:
    void open_streams(Pipes& pipes);
    void watch_events();
    void watch_stream(Stream& stream);

    bool done() const {
        if (!child_.reaped() || report_ || policy_open_) return false;
        for (std::size_t i = first_output_; i < streams_.size(); ++i)
            if (!streams_[i].drained()) return false;
        return true;
    }

    void on_timer() {
        deadline_.acknowledge();
        if (child_.reaped()) return;
        if (!interrupted_by_) timed_out_ = true;
        child_.kill(SIGKILL);
    }

    void on_signal() {
        int sig = signals_.take();
        if (sig == 0 || child_.reaped()) return;
        if (interrupted_by_ != 0) {  // asked twice: stop waiting for the script to wind down
            child_.kill(SIGKILL);
            return;
        }
        interrupted_by_ = sig;
        child_.kill(sig);  // init passes it to the script (KeyboardInterrupt for SIGINT)
        deadline_.arm(kInterruptGrace);
    }

    void on_report();

    void on_notification() {
        if (syscalls_.handle(notify_.get())) child_.kill(SIGKILL);
    }

    void on_policy_record() {
        if (policy_->drain(outcome_policy_) == PolicyChannel::Drained::closed) policy_open_ = false;
    }

    const Plan& plan_;
    sys::ChildGuard& child_;
    sys::SignalFd& signals_;
    sys::Poller poller_;
    UniqueFd report_;
    std::unique_ptr<PolicyChannel>& policy_;
    bool policy_open_ = policy_ != nullptr;
    policy::Records outcome_policy_;
    OutputBudget budget_;          // shared by stdout and stderr
    Transcript transcript_;        // the output, when it is captured for the JSON result
    std::vector<Stream> streams_;  // [stdin,] stdout, stderr
    std::size_t first_output_ = 0;
    sys::TimerFd deadline_;
    siginfo_t init_status_{};
    std::optional<Report> exited_;
    std::optional<Report> failure_;
    UniqueFd work_dir_;  // the sandbox's /tmp/work, sent during setup
    UniqueFd notify_;    // the seccomp listener, once the interpreter's process sent it
    SyscallWatch syscalls_{plan_};
    bool timed_out_ = false;
    int interrupted_by_ = 0;
    std::unique_ptr<proxy::Proxy> proxy_;  // network mode "proxy", once the sandbox sent its port
};

void Supervision::open_streams(Pipes& pipes) {
    UniqueFd child_stdin = std::move(pipes.in.write);
    ::fcntl(child_stdin.get(), F_SETFL, O_NONBLOCK);
    if (plan_.stdin_program)
        streams_.push_back(Stream::preloaded(*plan_.stdin_program, std::move(child_stdin)));
    else if (may_read_stdin())
        streams_.emplace_back(dup_fd(STDIN_FILENO), std::move(child_stdin), PIPE_BUF);
    // else: the script's stdin is closed at once and reads EOF.
    first_output_ = streams_.size();
    if (plan_.capture_output) {
        streams_.push_back(
            Stream::captured(std::move(pipes.out.read), transcript_, Transcript::kStdout, budget_));
        streams_.push_back(
            Stream::captured(std::move(pipes.err.read), transcript_, Transcript::kStderr, budget_));
        return;
    }
    streams_.emplace_back(std::move(pipes.out.read), dup_fd(STDOUT_FILENO),
                          write_chunk_for(STDOUT_FILENO), &budget_);
    streams_.emplace_back(std::move(pipes.err.read), dup_fd(STDERR_FILENO),
                          write_chunk_for(STDERR_FILENO), &budget_);
}

void Supervision::watch_stream(Stream& stream) {
    using Interest = sys::Poller::Interest;
    poller_.watch(
        [&stream] {
            return Interest{stream.wants_read() ? stream.from_fd() : -1, POLLIN};
        },
        [&stream](short revents) {
            if (revents & (POLLIN | POLLHUP | POLLERR)) stream.on_readable();
        });
    poller_.watch(
        [&stream] {
            return Interest{stream.wants_write() ? stream.to_fd() : -1, POLLOUT};
        },
        [&stream](short revents) {
            if (revents & POLLOUT)
                stream.on_writable();
            else if (revents & (POLLERR | POLLHUP))
                stream.on_sink_error();
        });
}

// The order is the order events are handled in one round: the deadline and signals first, the
// child's reports before its death, its output, and the reaping last.
void Supervision::watch_events() {
    using Interest = sys::Poller::Interest;
    poller_.watch(
        [this] {
            return Interest{deadline_.get(), POLLIN};
        },
        [this](short) { on_timer(); });
    poller_.watch(
        [this] {
            return Interest{signals_.get(), POLLIN};
        },
        [this](short) { on_signal(); });
    poller_.watch(
        [this] {
            return Interest{report_.get(), POLLIN};
        },
        [this](short) { on_report(); });
    poller_.watch(
        [this] {
            return Interest{notify_.get(), POLLIN};
        },
        [this](short revents) {
            if (revents & POLLIN)
                on_notification();
            else
                notify_.reset();  // every filtered process is gone
        });
    poller_.watch(
        [this] {
            return Interest{policy_open_ ? policy_->fd() : -1, POLLIN};
        },
        [this](short) { on_policy_record(); });
    for (Stream& stream : streams_) watch_stream(stream);
    poller_.watch(
        [this] {
            return Interest{child_.reaped() ? -1 : child_.pidfd(), POLLIN};
        },
        [this](short) { init_status_ = child_.reap(); });
}

void Supervision::on_report() {
    Report report;
    int fd = -1;
    ssize_t n = sys::receive_record(report_.get(), &report, sizeof report, fd);
    if (n < 0 && errno == EINTR) return;
    UniqueFd passed(fd);
    if (n != static_cast<ssize_t>(sizeof report)) {
        report_.reset();
        return;
    }
    switch (report.kind) {
        case ReportKind::listener: notify_ = std::move(passed); break;
        case ReportKind::proxy_listener:
            proxy_ = std::make_unique<proxy::Proxy>(std::move(passed), plan_.profile.network.allow);
            break;
        case ReportKind::work_dir: work_dir_ = std::move(passed); break;
        case ReportKind::exited: exited_ = report; break;
        case ReportKind::setup_failed:
        case ReportKind::exec_failed:
            if (!failure_) failure_ = report;
            break;
    }
}

Outcome Supervision::take_outcome(Clock::time_point start) {
    const Clock::time_point end = Clock::now();
    Outcome outcome;
    const Stream& out = streams_[first_output_];
    const Stream& err = streams_[first_output_ + 1];
    outcome.stdout_bytes = out.total();
    outcome.stderr_bytes = err.total();
    outcome.stdout_omitted = out.omitted();
    outcome.stderr_omitted = err.omitted();
    if (plan_.capture_output) {
        std::vector<Transcript::Segment> order = transcript_.order();
        outcome.captured =
            Outcome::Captured{transcript_.take(Transcript::kStdout),
                              transcript_.take(Transcript::kStderr), std::move(order)};
    }
    using std::chrono::duration_cast;
    using std::chrono::milliseconds;
    const std::int64_t exec_ns = exited_ ? exited_->exec_mono_ns : 0;
    if (exec_ns > 0) {
        const auto exec_at = Clock::time_point(std::chrono::nanoseconds(exec_ns));
        outcome.setup = duration_cast<milliseconds>(exec_at - start);
        outcome.wall = duration_cast<milliseconds>(end - exec_at);
    } else {
        outcome.wall = duration_cast<milliseconds>(end - start);
    }
    if (exited_) {
        outcome.cpu_ms = exited_->cpu_us / 1000;
        outcome.max_rss_kib = exited_->max_rss_kib;
    }
    syscalls_.report(outcome);
    outcome.policy = outcome_policy_;
    if (failure_) {
        outcome.kind = failure_->kind == ReportKind::exec_failed ? Outcome::Kind::exec_failed
                                                                 : Outcome::Kind::setup_failed;
        outcome.error = failure_->error;
        outcome.step = child_step_name(failure_->step);
        outcome.detail = failure_->detail;
    } else if (!outcome.killing_syscall.empty()) {
        outcome.kind = Outcome::Kind::policy_violation;
    } else if (interrupted_by_) {
        outcome.kind = Outcome::Kind::interrupted;
        outcome.signal = interrupted_by_;
    } else if (timed_out_) {
        outcome.kind = Outcome::Kind::timeout;
    } else if (exited_ && WIFEXITED(exited_->wait_status)) {
        outcome.kind = Outcome::Kind::exited;
        outcome.exit_code = WEXITSTATUS(exited_->wait_status);
    } else if (exited_ && WIFSIGNALED(exited_->wait_status)) {
        outcome.kind = Outcome::Kind::signaled;
        outcome.signal = WTERMSIG(exited_->wait_status);
    } else {
        outcome.kind = Outcome::Kind::lost;
        outcome.signal = init_status_.si_code == CLD_KILLED ? init_status_.si_status : 0;
    }
    return outcome;
}

std::unique_ptr<cgroup::RunCgroup> make_run_cgroup(const Plan& plan) {
    if (!plan.cgroup) return nullptr;
    const Limits& limits = plan.profile.limits;
    return std::make_unique<cgroup::RunCgroup>(
        *plan.cgroup, cgroup::Settings{limits.memory, limits.max_procs + 1, limits.cpus});
}

// clone3 into every new namespace (and the run's cgroup: born inside it, not one instruction
// runs outside the limits). The child never returns from run_child.
sys::ChildGuard clone_sandbox(const Plan& plan, const Pipes& pipes,
                              const cgroup::RunCgroup* cgroup) {
    int pidfd = -1;
    clone_args args{};
    args.flags = CLONE_PIDFD | kNamespaces;
    args.pidfd = reinterpret_cast<std::uintptr_t>(&pidfd);
    args.exit_signal = SIGCHLD;
    if (cgroup != nullptr) {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = static_cast<std::uint64_t>(cgroup->fd());
    }
    const long pid = ::syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0) run_child(plan, pipes.child_ends());
    if (pid < 0)
        throw UserNamespaceError(
            "clone3(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWNET|CLONE_NEWIPC|"
            "CLONE_NEWUTS|CLONE_NEWCGROUP)",
            errno);
    return sys::ChildGuard(pidfd, static_cast<pid_t>(pid));
}

}  // namespace

Supervised supervise(const Plan& plan) {
    // Block the forwarded signals before clone so none is lost between clone and the loop; the
    // child's init unblocks what it needs.
    sys::SignalFd signals{SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    // Root's supplementary groups (0 among them) must not follow the script, and nothing inside
    // can drop them once setgroups is denied: drop them here, before clone.
    if (plan.ids.privileged) check_sys(::setgroups(0, nullptr), "setgroups(0, {})");
    Pipes pipes;
    if (plan.profile.policy.wants_hook()) pipes.policy = std::make_unique<PolicyChannel>();
    Supervised supervised;
    const Clock::time_point start = Clock::now();
    supervised.start_realtime_ns = realtime_ns();
    supervised.cgroup = make_run_cgroup(plan);

    sys::ChildGuard child = clone_sandbox(plan, pipes, supervised.cgroup.get());
    pipes.close_child_ends();
    write_id_maps(child.pid(), plan.ids);
    check_sys(::write(pipes.release.write.get(), "1", 1), "write(release pipe)");
    pipes.release.write.reset();

    Supervision supervision(plan, child, signals, pipes);
    supervision.run();
    supervised.outcome = supervision.take_outcome(start);
    supervised.work_dir = supervision.take_work_dir();
    supervised.proxy = supervision.take_proxy();
    return supervised;
}

}  // namespace pysandbox
