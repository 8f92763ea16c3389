#include "engine/sandbox.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "engine/policy_channel.hpp"
#include "engine/zygote.hpp"
#include "inside/child.hpp"
#include "sys/dir_names.hpp"
#include "sys/errors.hpp"
#include "sys/records.hpp"
#include "sys/write_size.hpp"

namespace pysandbox {
namespace {

using Clock = std::chrono::steady_clock;
using sys::UniqueFd;

constexpr std::uint64_t kNamespaces = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
                                      CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;

UniqueFd dup_fd(int fd) {
    return UniqueFd(check_sys(::fcntl(fd, F_DUPFD_CLOEXEC, 3), "fcntl(F_DUPFD_CLOEXEC)"));
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
// kernel caps what an unprivileged user may have in pipe buffers. Non-blocking on the
// supervisor's side, so that a cut can read what is there without waiting for more.
sys::Pipe output_pipe() {
    sys::Pipe pipe = sys::Pipe::create();
    ::fcntl(pipe.read.get(), F_SETPIPE_SZ, 1 << 20);
    ::fcntl(pipe.read.get(), F_SETFL, O_NONBLOCK);
    return pipe;
}

std::unique_ptr<cgroup::RunCgroup> make_run_cgroup(const Plan& plan) {
    if (!plan.cgroup) return nullptr;
    const Limits& limits = plan.profile.limits;
    return std::make_unique<cgroup::RunCgroup>(
        *plan.cgroup, cgroup::Settings{limits.memory, limits.max_procs + 1, limits.cpus});
}

// "123 (name) S 1 ..." -> the fields after the command name, which may hold spaces and ')'.
std::optional<std::string> read_proc_text(int dir, const char* name) {
    UniqueFd fd(::openat(dir, name, O_RDONLY | O_CLOEXEC));
    if (!fd) return std::nullopt;
    char buffer[4096];
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer - 1);
    if (n <= 0) return std::nullopt;
    return std::string(buffer, static_cast<std::size_t>(n));
}

std::int64_t field_number(std::string_view text, std::size_t index) {
    std::size_t at = 0;
    for (std::size_t i = 0; i < index; ++i) {
        at = text.find(' ', at);
        if (at == std::string_view::npos) return 0;
        ++at;
    }
    std::int64_t value = 0;
    std::from_chars(text.data() + at, text.data() + text.size(), value);
    return value;
}

// What /proc/PID/stat says of one process (its threads together).
struct ProcStat {
    pid_t pid = 0;
    pid_t parent = 0;
    std::int64_t ticks = 0;  // CPU time: its own and that of the children it waited for
};

std::optional<ProcStat> proc_stat(int dir) {
    const auto stat = read_proc_text(dir, "stat");
    if (!stat) return std::nullopt;
    const std::size_t after_name = stat->rfind(") ");
    if (after_name == std::string::npos) return std::nullopt;
    ProcStat parsed;
    std::from_chars(stat->data(), stat->data() + stat->size(), parsed.pid);
    // Fields from the state on (proc(5): state is 3, ppid 4, utime 14, stime 15, cutime 16,
    // cstime 17).
    const std::string_view fields = std::string_view(*stat).substr(after_name + 2);
    parsed.parent = static_cast<pid_t>(field_number(fields, 4 - 3));
    for (std::size_t field = 14; field <= 17; ++field)
        parsed.ticks += field_number(fields, field - 3);
    return parsed;
}

// Its peak resident memory (VmHWM, KiB); 0 when /proc does not say.
std::int64_t peak_rss_kib(int dir) {
    const auto status = read_proc_text(dir, "status");
    std::int64_t kib = 0;
    if (!status) return kib;
    if (const std::size_t hwm = status->find("\nVmHWM:"); hwm != std::string::npos) {
        std::string_view rest = std::string_view(*status).substr(hwm + 7);
        rest.remove_prefix(std::min(rest.find_first_not_of(" \t"), rest.size()));
        std::from_chars(rest.data(), rest.data() + rest.size(), kib);
    }
    return kib;
}

// The children of the process whose /proc directory is `dir`, as its threads list them (each
// lists those it made).
std::vector<pid_t> proc_children(int dir) {
    std::vector<pid_t> pids;
    const UniqueFd tasks(::openat(dir, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!tasks) return pids;
    for (const std::string& task : sys::sorted_names(tasks.get())) {
        const auto listed = read_proc_text(tasks.get(), (task + "/children").c_str());
        if (!listed) continue;
        const char* at = listed->data();
        const char* const end = at + listed->size();
        pid_t pid = 0;
        for (auto read = std::from_chars(at, end, pid); read.ec == std::errc{};
             read = std::from_chars(at, end, pid)) {
            pids.push_back(pid);
            at = read.ptr + 1;  // past the space after each
            if (at >= end) break;
        }
    }
    return pids;
}

// The most processes tree_usage reads: gVisor's own are a handful, and the script's processes
// are not the host's (each address space has one ptrace stub, bounded by the profile's
// process limit inside gVisor).
constexpr std::size_t kMaxTreeProcesses = 1024;

// How often the CPU watch looks for runsc's container while runsc starts (Sandbox::on_cpu_watch),
// and the least time between two readings after it.
constexpr std::chrono::milliseconds kCpuWatchStartup{20};
constexpr std::chrono::milliseconds kCpuWatchLeast{10};

// The CPU time of the process whose /proc directory is `root` and of every process under it,
// summed (each with the children it waited for), and with `peak` the largest peak among them.
// A number that the process listing it no longer owns (it ended, and another took the number)
// names no child of it: the parent each claims is checked.
std::optional<Sandbox::Usage> tree_usage(int root, bool peak) {
    const auto top = proc_stat(root);
    if (!top) return std::nullopt;
    std::int64_t ticks = top->ticks;
    Sandbox::Usage usage;
    if (peak) usage.max_rss_kib = peak_rss_kib(root);
    std::vector<std::pair<pid_t, std::vector<pid_t>>> pending;
    pending.emplace_back(top->pid, proc_children(root));
    std::size_t read = 1;
    while (!pending.empty() && read < kMaxTreeProcesses) {
        const auto [parent, children] = std::move(pending.back());
        pending.pop_back();
        for (const pid_t pid : children) {
            if (read++ >= kMaxTreeProcesses) break;
            const UniqueFd dir(
                ::open(("/proc/" + std::to_string(pid)).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
            const auto stat = dir ? proc_stat(dir.get()) : std::nullopt;
            if (!stat || stat->parent != parent) continue;
            ticks += stat->ticks;
            if (peak) usage.max_rss_kib = std::max(usage.max_rss_kib, peak_rss_kib(dir.get()));
            pending.emplace_back(pid, proc_children(dir.get()));
        }
    }
    usage.cpu_ms = ticks * 1000 / ::sysconf(_SC_CLK_TCK);
    return usage;
}

}  // namespace

// The sandbox's channels: pipes, and the report socketpair (report_channel).
struct Sandbox::Pipes {
    sys::Pipe release = sys::Pipe::create();
    sys::Pipe report = report_channel();
    sys::Pipe in = sys::Pipe::create();
    sys::Pipe out = output_pipe();
    sys::Pipe err = output_pipe();

    ChildFds child_ends(const PolicyChannel* policy, int control) const {
        return {release.read.get(),
                report.write.get(),
                in.read.get(),
                out.write.get(),
                err.write.get(),
                policy ? policy->write_fd() : -1,
                control};
    }
    // The supervisor keeps only its own ends; the child's copies go with it.
    void close_child_ends() {
        release.read.reset();
        report.write.reset();
        in.read.reset();
        out.write.reset();
        err.write.reset();
    }
};

Sandbox::Sandbox(const Plan& plan, sys::Poller& poller) : Sandbox(plan, poller, nullptr) {}

Sandbox::Sandbox(const Plan& plan, sys::Poller& poller, Zygote& zygote)
    : Sandbox(plan, poller, &zygote) {}

Sandbox::Sandbox(const Plan& plan, sys::Poller& poller, Zygote* zygote)
    : plan_(plan),
      poller_(poller),
      start_(Clock::now()),
      start_realtime_ns_(realtime_ns()),
      cgroup_(make_run_cgroup(plan)),
      budget_(OutputBudget::for_limit(plan.profile.limits.output_limit)),
      syscalls_(plan) {
    if (plan.profile.policy.wants_hook())
        policy_ = std::make_unique<PolicyChannel>(plan.gvisor ? PolicyChannel::Mode::listening
                                                              : PolicyChannel::Mode::pair);
    if (plan.program_kind == Program::Kind::driver)
        control_ = std::make_unique<ControlChannel>(
            ControlBudget{},
            plan.gvisor ? ControlChannel::Mode::listening : ControlChannel::Mode::pair);
    // A zygote's channel carries descriptors: a SOCK_SEQPACKET pair, read by its owner
    // (zygote.cpp), not a ControlChannel.
    sys::Pipe nest;
    if (plan.program_kind == Program::Kind::zygote) nest = report_channel();
    const int control_end = control_ ? control_->child_fd() : nest.write.get();
    Pipes pipes;

    if (zygote) {
        Forked forked = zygote->fork(pipes.child_ends(policy_.get(), control_end));
        child_.emplace(forked.pidfd.release(), forked.pid, sys::ChildGuard::Parent::other);
        zygote_ = std::move(forked.zygote);
    } else {
        clone_child(pipes, control_end);
    }
    pipes.close_child_ends();
    if (policy_) policy_->close_write_end();
    if (control_) control_->close_child_end();
    nest.write.reset();
    zygote_channel_ = std::move(nest.read);
    if (!zygote) {
        write_id_maps(child_->pid(), plan.ids);
        check_sys(::write(pipes.release.write.get(), "1", 1), "write(release pipe)");
    }
    pipes.release.write.reset();

    report_ = std::move(pipes.report.read);
    open_streams(pipes);
    watch(poller);
}

// clone3 into every new namespace (and the run's cgroup: born inside it, not one instruction
// runs outside the limits). The child never returns from run_child.
void Sandbox::clone_child(Pipes& pipes, int control_end) {
    int pidfd = -1;
    clone_args args{};
    args.flags = CLONE_PIDFD | kNamespaces;
    args.pidfd = reinterpret_cast<std::uintptr_t>(&pidfd);
    args.exit_signal = SIGCHLD;
    if (cgroup_) {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = static_cast<std::uint64_t>(cgroup_->fd());
    }
    const long pid = ::syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0) run_child(plan_, pipes.child_ends(policy_.get(), control_end));
    if (pid < 0)
        throw UserNamespaceError(
            "clone3(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWNET|CLONE_NEWIPC|"
            "CLONE_NEWUTS|CLONE_NEWCGROUP)",
            errno);
    child_.emplace(pidfd, static_cast<pid_t>(pid));
}

Sandbox::~Sandbox() {
    poller_.forget(this);
    child_.reset();  // kills and reaps what is left
}

void Sandbox::open_streams(Pipes& pipes) {
    UniqueFd child_stdin = std::move(pipes.in.write);
    ::fcntl(child_stdin.get(), F_SETFL, O_NONBLOCK);
    if (plan_.program_kind == Program::Kind::driver)
        stdin_write_ = std::move(child_stdin);
    else if (plan_.program_kind == Program::Kind::zygote)
        child_stdin.reset();  // end of file at once: its jobs have their own
    else if (plan_.stdin_program)
        input_.emplace(Stream::preloaded(*plan_.stdin_program, std::move(child_stdin)));
    else if (plan_.pass_stdin && may_read_stdin())
        input_.emplace(dup_fd(STDIN_FILENO), std::move(child_stdin), PIPE_BUF);
    // else: the script's stdin is closed at once and reads EOF.
    if (plan_.capture_output) {
        out_.emplace(Stream::captured(std::move(pipes.out.read), transcript_, Transcript::kStdout,
                                      budget_, &observer_));
        err_.emplace(Stream::captured(std::move(pipes.err.read), transcript_, Transcript::kStderr,
                                      budget_, &observer_));
        rewrite_traceback_paths();
        return;
    }
    out_.emplace(std::move(pipes.out.read), dup_fd(STDOUT_FILENO),
                 sys::write_size_after_pollout(STDOUT_FILENO), &budget_);
    err_.emplace(std::move(pipes.err.read), dup_fd(STDERR_FILENO),
                 sys::write_size_after_pollout(STDERR_FILENO), &budget_);
    err_->keep_last(Outcome::kStderrTail);
    rewrite_traceback_paths();
}

// The script's frames in tracebacks name the caller's path (Plan::script_in_sandbox). Only the
// exact prefix is swapped, on stderr only: a line the script prints itself with that prefix is
// rewritten the same way, which is harmless.
void Sandbox::rewrite_traceback_paths() {
    if (plan_.script_in_sandbox.empty()) return;
    auto prefix = [](const std::string& file) { return "  File \"" + file + "\", line "; };
    err_->rewrite_lines(prefix(plan_.script_in_sandbox), prefix(plan_.script_file));
}

void Sandbox::feed_stdin(std::string content) {
    if (!stdin_write_) return;
    input_.emplace(Stream::preloaded(std::move(content), std::move(stdin_write_)));
}

bool Sandbox::orphaned() const {
    return zygote_ && zygote_->ended();
}

bool Sandbox::finished() const {
    if (!child_->reaped() || report_ || (policy_ && policy_->open())) return false;
    return out_->drained() && err_->drained();
}

void Sandbox::watch_stream(std::optional<Stream>& slot, sys::Poller& poller) {
    using Interest = sys::Poller::Interest;
    poller.watch(
        [&slot] {
            return Interest{slot && slot->wants_read() ? slot->from_fd() : -1, POLLIN};
        },
        [&slot](short revents) {
            if (revents & (POLLIN | POLLHUP | POLLERR)) slot->on_readable();
        },
        this);
    poller.watch(
        [&slot] {
            return Interest{slot && slot->wants_write() ? slot->to_fd() : -1, POLLOUT};
        },
        [&slot](short revents) {
            if (revents & POLLOUT)
                slot->on_writable();
            else if (revents & (POLLERR | POLLHUP))
                slot->on_sink_error();
        },
        this);
}

// The order is the order events are handled in one round: the child's reports before its
// death, its output, and the reaping last.
void Sandbox::watch(sys::Poller& poller) {
    using Interest = sys::Poller::Interest;
    poller.watch(
        [this] {
            return Interest{report_.get(), POLLIN};
        },
        [this](short) { on_report(); }, this);
    poller.watch(
        [this] {
            return Interest{notify_.get(), POLLIN};
        },
        [this](short revents) {
            if (revents & POLLIN)
                on_notification();
            else
                notify_.reset();  // every filtered process is gone
        },
        this);
    poller.watch(
        [this] {
            return Interest{policy_ ? policy_->fd() : -1, POLLIN};
        },
        [this](short) { policy_->drain(policy_records_); }, this);
    if (control_) {
        poller.watch(
            [this] {
                // A muted channel is not read: its driver's writes wait, and cost nothing here.
                const bool open = !control_->closed();
                return Interest{open ? control_->fd() : -1,
                                static_cast<short>((control_->wants_read() ? POLLIN : 0) |
                                                   (control_->wants_write() ? POLLOUT : 0))};
            },
            [this](short revents) {
                if (revents & POLLOUT) control_->on_writable();
                if (revents & (POLLIN | POLLHUP | POLLERR)) control_->on_readable();
            },
            this);
    }
    watch_stream(input_, poller);
    watch_stream(out_, poller);
    watch_stream(err_, poller);
    if (plan_.gvisor) {
        cpu_watch_.emplace();
        cpu_watch_->arm(kCpuWatchStartup);
        poller.watch(
            [this] {
                return Interest{child_->reaped() ? -1 : cpu_watch_->get(), POLLIN};
            },
            [this](short) { on_cpu_watch(); }, this);
    }
    poller.watch(
        [this] {
            return Interest{child_->reaped() ? -1 : child_->pidfd(), POLLIN};
        },
        [this](short) {
            init_status_ = child_->reap();
            if (policy_) policy_->sandbox_gone();
            if (control_) control_->sandbox_gone();
        },
        this);
}

// Under gVisor the script's CPU time is spent in runsc's processes (its sentry, the ptrace stubs),
// where gVisor's own CPU limit would end the script with SIGXCPU, which runsc reports as exit code
// 152, as a script could exit by itself. So the supervisor enforces the limit, over what the host
// counts for them (interpreter_usage) beyond runsc's start, and ends the sandbox at it: the
// verdict is its own (gVisor's limit and the host's on runsc are set further, as backstops:
// plan/gvisor.cpp). CPU time has no event: it is read when the limit could first be reached,
// the time left over the CPUs the processes may use, and then again.
void Sandbox::on_cpu_watch() {
    cpu_watch_->acknowledge();
    if (!running() || cpu_limit_reached_ms_) return;
    const std::optional<Usage> usage = interpreter_usage(false);
    if (!cpu_baseline_ms_) {
        // runsc writes the container's pid file once gVisor has booted, as it starts the script.
        if (usage && ::faccessat(interpreter_.get(), ("root" + plan_.gvisor->started_file).c_str(),
                                 F_OK, 0) == 0)
            cpu_baseline_ms_ = usage->cpu_ms;
        cpu_watch_->arm(kCpuWatchStartup);
        return;
    }
    const std::int64_t limit_ms = plan_.profile.limits.cpu_time.count();
    const std::int64_t used_ms = usage ? usage->cpu_ms - *cpu_baseline_ms_ : 0;
    if (used_ms >= limit_ms) {
        cpu_limit_reached_ms_ = usage->cpu_ms;
        kill();
        return;
    }
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    const int count = ::sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 0;
    cpu_watch_->arm(std::max<std::chrono::nanoseconds>(
        kCpuWatchLeast, std::chrono::milliseconds((limit_ms - used_ms) / std::max(count, 1))));
}

void Sandbox::on_notification() {
    if (syscalls_.handle(notify_.get())) child_->kill(SIGKILL);
}

void Sandbox::on_report() {
    Report report;
    int fd = -1;
    ssize_t n = sys::receive_record(report_.get(), &report, sizeof report, fd);
    if (n < 0 && errno == EINTR) return;
    UniqueFd passed(fd);
    if (n != static_cast<ssize_t>(sizeof report)) {
        report_.reset();
        return;
    }
    // Init sends each descriptor once, while it sets the sandbox up, before any script runs:
    // the first of each kind is the one, whatever arrives later is dropped (and closed).
    switch (report.kind) {
        case ReportKind::listener:
            if (!notify_) notify_ = std::move(passed);
            break;
        case ReportKind::proxy_listener:
            if (!proxy_)
                proxy_ =
                    std::make_unique<proxy::Proxy>(std::move(passed), plan_.profile.network.allow);
            break;
        case ReportKind::work_dir:
            if (!work_dir_) work_dir_ = std::move(passed);
            break;
        case ReportKind::exited: exited_ = report; break;
        case ReportKind::setup_failed:
        case ReportKind::exec_failed:
            if (!failure_) failure_ = report;
            break;
    }
}

std::optional<Sandbox::Usage> Sandbox::interpreter_usage(bool peak) {
    if (!interpreter_ && running()) {
        // The interpreter is init's first child: the oldest in init's list of children.
        const std::string init = "/proc/" + std::to_string(child_->pid());
        UniqueFd dir(::open((init + "/task/" + std::to_string(child_->pid())).c_str(),
                            O_PATH | O_DIRECTORY | O_CLOEXEC));
        const auto children = dir ? read_proc_text(dir.get(), "children") : std::nullopt;
        pid_t pid = 0;
        if (children) std::from_chars(children->data(), children->data() + children->size(), pid);
        if (pid > 0)
            interpreter_.reset(
                ::open(("/proc/" + std::to_string(pid)).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    }
    if (!interpreter_) return std::nullopt;
    // Through the directory opened while it lived: a gone process's files cannot be opened, and
    // its number, reused, names another process's. Under gVisor the interpreter is runsc, and
    // the script's cost is that of the processes under it (tree_usage).
    if (plan_.profile.kernel == KernelChoice::gvisor) return tree_usage(interpreter_.get(), peak);
    const auto stat = proc_stat(interpreter_.get());
    if (!stat) return std::nullopt;
    Usage usage;
    usage.cpu_ms = stat->ticks * 1000 / ::sysconf(_SC_CLK_TCK);
    if (peak) usage.max_rss_kib = peak_rss_kib(interpreter_.get());
    return usage;
}

CutOutput Sandbox::cut_output() {
    CutOutput cut;
    for (std::optional<Stream>* stream : {&out_, &err_}) (*stream)->read_available();
    const Stream::Cut out = out_->cut();
    const Stream::Cut err = err_->cut();
    cut.stdout_bytes = out.total;
    cut.stderr_bytes = err.total;
    cut.stdout_omitted = out.omitted;
    cut.stderr_omitted = err.omitted;
    cut.stdout_reader_gone = out_->sink_gone();
    if (plan_.capture_output) {
        std::vector<Transcript::Segment> order = transcript_.order();
        const bool stdout_is_text = transcript_.is_text(Transcript::kStdout);
        const bool stderr_is_text = transcript_.is_text(Transcript::kStderr);
        cut.captured = Outcome::Captured{transcript_.take(Transcript::kStdout),
                                         transcript_.take(Transcript::kStderr), std::move(order),
                                         stdout_is_text, stderr_is_text};
        transcript_.clear();
    } else {
        cut.stderr_tail = err_->take_kept();
    }
    budget_ = OutputBudget::for_limit(plan_.profile.limits.output_limit);
    return cut;
}

bool Sandbox::output_pending() const {
    return out_->wants_write() || err_->wants_write();
}

void Sandbox::take_blocks(Outcome& outcome) {
    syscalls_.take(outcome);
    if (policy_) policy_->drain(policy_records_);
    outcome.policy.blocks = std::move(policy_records_.blocks);
    outcome.policy.hook_installed = policy_records_.hook_installed;
    policy_records_.blocks.clear();
}

Outcome Sandbox::outcome(Ending ending) const {
    const Clock::time_point end = Clock::now();
    Outcome outcome;
    using std::chrono::duration_cast;
    using std::chrono::milliseconds;
    const std::int64_t exec_ns = exited_ ? exited_->exec_mono_ns : 0;
    if (exec_ns > 0) {
        const auto exec_at = Clock::time_point(std::chrono::nanoseconds(exec_ns));
        outcome.setup = duration_cast<milliseconds>(exec_at - start_);
        outcome.wall = duration_cast<milliseconds>(end - exec_at);
    } else {
        outcome.wall = duration_cast<milliseconds>(end - start_);
    }
    if (exited_) {
        outcome.cpu_ms = exited_->cpu_us / 1000;
        outcome.max_rss_kib = exited_->max_rss_kib;
    }
    if (failure_) {
        outcome.kind = failure_->kind == ReportKind::exec_failed ? Outcome::Kind::exec_failed
                                                                 : Outcome::Kind::setup_failed;
        outcome.error = failure_->error;
        outcome.step = child_step_name(failure_->step);
        outcome.detail = failure_->detail;
    } else if (!syscalls_.killing_syscall().empty()) {
        outcome.kind = Outcome::Kind::policy_violation;
    } else if (cpu_limit_reached_ms_) {
        // Killed by the supervisor at the CPU limit (on_cpu_watch), which is its verdict.
        outcome.kind = Outcome::Kind::signaled;
        outcome.signal = SIGKILL;
        outcome.cpu_ms = *cpu_limit_reached_ms_;
        outcome.cpu_limit_reached = true;
    } else if (ending.interrupted_by) {
        outcome.kind = Outcome::Kind::interrupted;
        outcome.signal = ending.interrupted_by;
    } else if (ending.timed_out) {
        outcome.kind = Outcome::Kind::timeout;
    } else if (exited_ && WIFEXITED(exited_->wait_status)) {
        outcome.kind = Outcome::Kind::exited;
        outcome.exit_code = WEXITSTATUS(exited_->wait_status);
    } else if (exited_ && WIFSIGNALED(exited_->wait_status)) {
        outcome.kind = Outcome::Kind::signaled;
        outcome.signal = WTERMSIG(exited_->wait_status);
    } else if (zygote_ && zygote_->ended()) {
        outcome.kind = Outcome::Kind::zygote_lost;
        outcome.error = ECHILD;
    } else {
        outcome.kind = Outcome::Kind::lost;
        outcome.signal = init_status_.si_code == CLD_KILLED ? init_status_.si_status : 0;
    }
    return outcome;
}

Supervised Sandbox::take(Ending ending) {
    Supervised supervised;
    supervised.outcome = outcome(ending);
    Outcome& outcome = supervised.outcome;
    CutOutput output = cut_output();
    outcome.stdout_bytes = output.stdout_bytes;
    outcome.stderr_bytes = output.stderr_bytes;
    outcome.stdout_omitted = output.stdout_omitted;
    outcome.stderr_omitted = output.stderr_omitted;
    outcome.stdout_reader_gone = output.stdout_reader_gone;
    outcome.captured = std::move(output.captured);
    outcome.stderr_tail = std::move(output.stderr_tail);
    syscalls_.report(outcome);
    outcome.policy = std::move(policy_records_);
    supervised.work_dir = std::move(work_dir_);
    supervised.proxy = std::move(proxy_);
    supervised.cgroup = std::move(cgroup_);
    supervised.start_realtime_ns = start_realtime_ns_;
    supervised.ended = ending.due.value_or(Clock::now());
    return supervised;
}

}  // namespace pysandbox
