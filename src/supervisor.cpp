#include "supervisor.hpp"

#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "cgroup.hpp"
#include "child.hpp"
#include "errors.hpp"
#include "proxy.hpp"
#include "report.hpp"
#include "seccomp.hpp"
#include "sys/child_guard.hpp"
#include "sys/records.hpp"
#include "sys/signal_fd.hpp"
#include "sys/timer_fd.hpp"
#include "stream.hpp"
#include "sys/unique_fd.hpp"

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

}  // namespace

std::string user_namespace_hint() {
    std::ifstream apparmor("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
    int restricted = 0;
    if (apparmor >> restricted && restricted == 1)
        return "AppArmor restricts unprivileged user namespaces: "
               "sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0 (or install an AppArmor "
               "profile for pysandbox)";
    std::ifstream max_ns("/proc/sys/user/max_user_namespaces");
    long max = -1;
    if (max_ns >> max && max == 0) return "sudo sysctl user.max_user_namespaces=15000";
    std::ifstream debian("/proc/sys/kernel/unprivileged_userns_clone");
    int allowed = 1;
    if (debian >> allowed && allowed == 0) return "sudo sysctl kernel.unprivileged_userns_clone=1";
    return "check that user namespaces are enabled (pysandbox doctor)";
}

namespace {

void write_proc_file(pid_t pid, const char* name, const std::string& content) {
    std::string path = "/proc/" + std::to_string(pid) + "/" + name;
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd || ::write(fd.get(), content.data(), content.size()) !=
                   static_cast<ssize_t>(content.size())) {
        const int error = errno;
        throw SysError("write(" + path + ", \"" + content.substr(0, content.find('\n')) + "\")",
                       error, user_namespace_hint());
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

// The audit hook's records: a sealed memfd of fixed size rather than a pipe, so a write can
// never block (a full channel fails with EPERM instead of stalling the script until its time
// limit), nothing has to be read while the script runs, and the script cannot make it bigger.
// The interpreter gets a write-only description of it; pysandbox reads the records after the run.
constexpr std::size_t kPolicyChannelSize = std::size_t{1} << 20;

struct PolicyChannel {
    sys::UniqueFd read;
    sys::UniqueFd write;

    static PolicyChannel create() {
        PolicyChannel channel;
        channel.read.reset(check_sys(
            ::memfd_create("pysandbox-policy", MFD_CLOEXEC | MFD_ALLOW_SEALING), "memfd_create"));
        check_sys(::ftruncate(channel.read.get(), kPolicyChannelSize), "ftruncate(policy channel)");
        check_sys(::fcntl(channel.read.get(), F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL),
                  "fcntl(policy channel, F_ADD_SEALS)");
        const std::string self = "/proc/self/fd/" + std::to_string(channel.read.get());
        channel.write.reset(check_sys(::open(self.c_str(), O_WRONLY | O_CLOEXEC), "open(" + self + ")"));
        return channel;
    }

    // The records: everything before the first NUL (the unwritten rest of the file is zeros).
    // Read in growing pieces: a run usually leaves one short line, and reading the whole
    // megabyte every time would cost more than the rest of the bookkeeping.
    std::string records() const {
        std::string text;
        std::size_t piece = 4096;
        while (text.size() < kPolicyChannelSize) {
            const std::size_t offset = text.size();
            text.resize(std::min(kPolicyChannelSize, offset + piece));
            ssize_t n;
            while ((n = ::pread(read.get(), text.data() + offset, text.size() - offset,
                                static_cast<off_t>(offset))) < 0 &&
                   errno == EINTR) {
            }
            text.resize(offset + (n > 0 ? static_cast<std::size_t>(n) : 0));
            if (auto end = text.find('\0', offset); end != std::string::npos) {
                text.resize(end);
                break;
            }
            if (n <= 0) break;
            piece *= 4;
        }
        return text;
    }
};

struct Pipes {
    sys::Pipe release = sys::Pipe::create();
    sys::Pipe report = report_channel();
    sys::Pipe in = sys::Pipe::create();
    sys::Pipe out = output_pipe();
    sys::Pipe err = output_pipe();
    std::optional<PolicyChannel> policy;  // only when the profile has a [policy]
};

// The poll loop's state: what the supervisor watches and what it learned.
class Supervision {
public:
    Supervision(const Plan& plan, sys::ChildGuard& child, sys::SignalFd& signals, Pipes& pipes,
                Clock::time_point start, std::int64_t start_realtime_ns)
        : plan_(plan),
          child_(child),
          signals_(signals),
          start_(start),
          start_realtime_ns_(start_realtime_ns),
          report_(std::move(pipes.report.read)),
          budget_(OutputBudget::for_limit(plan.profile.limits.output_limit)) {
        UniqueFd child_stdin = std::move(pipes.in.write);
        ::fcntl(child_stdin.get(), F_SETFL, O_NONBLOCK);
        if (plan.stdin_program)
            streams_.push_back(Stream::preloaded(*plan.stdin_program, std::move(child_stdin)));
        else if (may_read_stdin())
            streams_.emplace_back(dup_fd(STDIN_FILENO), std::move(child_stdin), PIPE_BUF);
        // else: the script's stdin is closed at once and reads EOF.
        first_output_ = streams_.size();
        if (plan.capture_output) {
            streams_.push_back(Stream::captured(std::move(pipes.out.read), transcript_,
                                                Transcript::kStdout, budget_));
            streams_.push_back(Stream::captured(std::move(pipes.err.read), transcript_,
                                                Transcript::kStderr, budget_));
            return;
        }
        streams_.emplace_back(std::move(pipes.out.read), dup_fd(STDOUT_FILENO),
                              write_chunk_for(STDOUT_FILENO), &budget_);
        streams_.emplace_back(std::move(pipes.err.read), dup_fd(STDERR_FILENO),
                              write_chunk_for(STDERR_FILENO), &budget_);
    }

    Outcome run() {
        deadline_.arm(plan_.profile.limits.wall_time);
        while (!done()) poll_once();
        return finish();
    }

private:
    enum Slot { kPidfd, kTimer, kSignals, kReport, kNotify, kFixed };

    bool done() const {
        if (!child_.reaped() || report_) return false;
        for (std::size_t i = first_output_; i < streams_.size(); ++i)
            if (!streams_[i].drained()) return false;
        return true;
    }

    void poll_once() {
        std::vector<pollfd> fds(kFixed);
        fds[kPidfd] = {child_.reaped() ? -1 : child_.pidfd(), POLLIN, 0};
        fds[kTimer] = {deadline_.get(), POLLIN, 0};
        fds[kSignals] = {signals_.get(), POLLIN, 0};
        fds[kReport] = {report_ ? report_.get() : -1, POLLIN, 0};
        fds[kNotify] = {notify_ ? notify_.get() : -1, POLLIN, 0};
        for (const auto& stream : streams_) {
            fds.push_back({stream.wants_read() ? stream.from_fd() : -1, POLLIN, 0});
            fds.push_back({stream.wants_write() ? stream.to_fd() : -1, POLLOUT, 0});
        }
        if (::poll(fds.data(), fds.size(), -1) < 0) {
            if (errno == EINTR) return;
            throw SysError("poll", errno);
        }
        if (fds[kTimer].revents) on_timer();
        if (fds[kSignals].revents) on_signal();
        if (fds[kReport].revents) on_report();
        if (fds[kNotify].revents & POLLIN)
            on_denied_syscall();
        else if (fds[kNotify].revents)
            notify_.reset();  // every filtered process is gone
        for (std::size_t i = 0; i < streams_.size(); ++i) {
            const pollfd& in = fds[kFixed + 2 * i];
            const pollfd& out = fds[kFixed + 2 * i + 1];
            if (in.revents & (POLLIN | POLLHUP | POLLERR)) streams_[i].on_readable();
            if (out.revents & POLLOUT)
                streams_[i].on_writable();
            else if (out.revents & (POLLERR | POLLHUP))
                streams_[i].on_sink_error();
        }
        if (fds[kPidfd].revents) init_status_ = child_.reap();
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

    void on_report() {
        Report report;
        int fd = -1;
        ssize_t n = sys::receive_record(report_.get(), &report, sizeof report, fd);
        if (n < 0 && errno == EINTR) return;
        UniqueFd passed(fd);
        if (n != static_cast<ssize_t>(sizeof report)) {
            report_.reset();
            return;
        }
        if (report.kind == ReportKind::listener) {
            notify_ = std::move(passed);
        } else if (report.kind == ReportKind::proxy_listener) {
            proxy_ = std::make_unique<proxy::Proxy>(std::move(passed), plan_.allowlist);
        } else if (report.kind == ReportKind::work_dir) {
            work_dir_ = std::move(passed);
        } else if (report.kind == ReportKind::exited) {
            exited_ = report;
        } else if (!failure_) {
            failure_ = report;
        }
    }

    // A script asked for a denied system call: count it by name, then refuse it (EPERM) or end
    // the sandbox, as the profile says.
    void on_denied_syscall() {
        // The kernel refuses (EINVAL) a request buffer that is not zeroed.
        std::memset(notification_.request, 0, notification_.request_size);
        if (seccomp_notify_receive(notify_.get(), notification_.request) != 0) return;
        std::string name = seccomp::syscall_name(notification_.request->data.arch,
                                                 notification_.request->data.nr);
        ++blocked_[name];
        if (plan_.verbose) std::fprintf(stderr, "pysandbox: denied %s\n", name.c_str());
        seccomp_notif_resp* response = notification_.response;
        std::memset(response, 0, sizeof *response);
        response->id = notification_.request->id;
        response->error = -EPERM;
        if (plan_.profile.seccomp.kill) {
            // No answer: the call stays blocked until the kill lands, so nothing after it runs.
            if (killing_syscall_.empty()) killing_syscall_ = name;
            child_.kill(SIGKILL);
            return;
        }
        seccomp_notify_respond(notify_.get(), response);  // ENOENT: the caller died meanwhile
    }

    // Runs when nothing of the sandbox is left, so nothing inside changes the tree meanwhile.
    std::vector<artifacts::Artifact> list_artifacts() {
        artifacts::Options options;
        for (const auto& input : plan_.inputs) options.inputs.push_back(input.name);
        options.max_file_size = plan_.profile.limits.artifact_size;
        options.max_total_size = plan_.profile.limits.artifacts_total;
        // A --workdir holds earlier runs' files too: only what this run wrote is an artifact.
        if (plan_.host_workdir) options.modified_after_ns = start_realtime_ns_;
        UniqueFd host_dir;
        if (plan_.output_dir) {
            options.output_dir_path = *plan_.output_dir;
            host_dir.reset(::open(plan_.output_dir->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
            options.output_dir = host_dir ? host_dir.get() : artifacts::kHostDirMissing;
        }
        return artifacts::collect(work_dir_.get(), options);
    }

    Outcome finish() {
        const Clock::time_point end = Clock::now();
        Outcome outcome;
        outcome.stdout_bytes = streams_[first_output_].total();
        outcome.stderr_bytes = streams_[first_output_ + 1].total();
        outcome.stdout_omitted = streams_[first_output_].omitted();
        outcome.stderr_omitted = streams_[first_output_ + 1].omitted();
        if (plan_.capture_output) {
            std::string interleaved = transcript_.interleaved();
            outcome.captured = Outcome::Captured{transcript_.take(Transcript::kStdout),
                                                 transcript_.take(Transcript::kStderr),
                                                 std::move(interleaved)};
        }
        std::int64_t exec_ns = exited_ ? exited_->exec_mono_ns : 0;
        if (exec_ns > 0) {
            auto exec_at = Clock::time_point(std::chrono::nanoseconds(exec_ns));
            outcome.setup = std::chrono::duration_cast<std::chrono::milliseconds>(exec_at - start_);
            outcome.wall = std::chrono::duration_cast<std::chrono::milliseconds>(end - exec_at);
        } else {
            outcome.wall = std::chrono::duration_cast<std::chrono::milliseconds>(end - start_);
        }
        if (exited_) {
            outcome.cpu_ms = exited_->cpu_us / 1000;
            outcome.max_rss_kib = exited_->max_rss_kib;
        }

        if (work_dir_) outcome.files = list_artifacts();
        outcome.blocked_syscalls = blocked_;
        if (proxy_) outcome.blocked_connections = proxy_->stop();
        if (failure_) {
            outcome.kind = failure_->kind == ReportKind::exec_failed ? Outcome::Kind::exec_failed
                                                                      : Outcome::Kind::setup_failed;
            outcome.error = failure_->error;
            outcome.step = child_step_name(failure_->step);
            outcome.detail = failure_->detail;
        } else if (!killing_syscall_.empty()) {
            outcome.kind = Outcome::Kind::policy_violation;
            outcome.killing_syscall = killing_syscall_;
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

    const Plan& plan_;
    sys::ChildGuard& child_;
    sys::SignalFd& signals_;
    Clock::time_point start_;
    // The clock file timestamps come from (the coarse one), read before the sandbox started.
    std::int64_t start_realtime_ns_;
    UniqueFd report_;
    OutputBudget budget_;          // shared by stdout and stderr
    Transcript transcript_;        // the output, when it is captured for the JSON result
    std::vector<Stream> streams_;  // [stdin,] stdout, stderr
    std::size_t first_output_ = 0;
    sys::TimerFd deadline_;
    siginfo_t init_status_{};
    std::optional<Report> exited_;
    std::optional<Report> failure_;
    UniqueFd work_dir_;  // the sandbox's /tmp/work, sent during setup
    UniqueFd notify_;  // the seccomp listener, once the interpreter's process sent it
    struct Notification {
        seccomp_notif* request = nullptr;
        seccomp_notif_resp* response = nullptr;
        std::size_t request_size = sizeof(seccomp_notif);
        Notification() {
            check_sys(-std::abs(seccomp_notify_alloc(&request, &response)), "seccomp_notify_alloc");
            seccomp_notif_sizes sizes{};
            if (::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) == 0)
                request_size = std::max<std::size_t>(request_size, sizes.seccomp_notif);
        }
        ~Notification() { seccomp_notify_free(request, response); }
        Notification(const Notification&) = delete;
        Notification& operator=(const Notification&) = delete;
    } notification_;
    std::map<std::string, std::uint64_t> blocked_;
    std::string killing_syscall_;
    bool timed_out_ = false;
    int interrupted_by_ = 0;
    std::unique_ptr<proxy::Proxy> proxy_;  // network mode "proxy", once the sandbox sent its port
};

}  // namespace

Outcome run_sandbox(const Plan& plan) {
    // Block the forwarded signals before clone so none is lost between clone and the loop; the
    // child's init unblocks what it needs.
    sys::SignalFd signals{SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    // Root's supplementary groups (0 among them) must not follow the script, and nothing inside
    // can drop them once setgroups is denied: drop them here, before clone.
    if (plan.ids.privileged) check_sys(::setgroups(0, nullptr), "setgroups(0, {})");
    Pipes pipes;
    if (policy::wants_hook(plan.profile)) pipes.policy = PolicyChannel::create();
    const Clock::time_point start = Clock::now();
    const std::int64_t start_realtime_ns = realtime_ns();
    std::optional<cgroup::RunCgroup> cgroup;
    if (plan.cgroup) {
        const Limits& limits = plan.profile.limits;
        cgroup.emplace(*plan.cgroup, cgroup::Settings{limits.memory, limits.max_procs + 1,
                                                      limits.cpus});
    }

    int pidfd = -1;
    clone_args args{};
    args.flags = CLONE_PIDFD | kNamespaces;
    args.pidfd = reinterpret_cast<std::uintptr_t>(&pidfd);
    args.exit_signal = SIGCHLD;
    if (cgroup) {  // born inside it: not one instruction runs outside the limits
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = static_cast<std::uint64_t>(cgroup->fd());
    }
    const long pid = ::syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0) {
        run_child(plan, ChildFds{pipes.release.read.get(), pipes.report.write.get(),
                                 pipes.in.read.get(), pipes.out.write.get(),
                                 pipes.err.write.get(),
                                 pipes.policy ? pipes.policy->write.get() : -1});
    }
    if (pid < 0) {
        const int error = errno;  // read before the hint opens files
        throw SysError("clone3(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWNET|CLONE_NEWIPC|"
                       "CLONE_NEWUTS|CLONE_NEWCGROUP)",
                       error, "cannot create user namespaces: " + user_namespace_hint());
    }
    sys::ChildGuard child(pidfd, static_cast<pid_t>(pid));

    // The supervisor keeps only its own ends; the child's copies go with it.
    pipes.release.read.reset();
    pipes.report.write.reset();
    pipes.in.read.reset();
    pipes.out.write.reset();
    pipes.err.write.reset();
    if (pipes.policy) pipes.policy->write.reset();

    write_id_maps(child.pid(), plan.ids);
    check_sys(::write(pipes.release.write.get(), "1", 1), "write(release pipe)");
    pipes.release.write.reset();

    Supervision supervision(plan, child, signals, pipes, start, start_realtime_ns);
    Outcome outcome = supervision.run();
    if (cgroup) outcome.oom_kills = cgroup->oom_kills();
    if (pipes.policy) outcome.policy = policy::parse_records(pipes.policy->records());
    return outcome;
}

}  // namespace pysandbox
