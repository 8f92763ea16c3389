#include "inside/init.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <iterator>
#include <optional>
#include <string_view>

#include "inside/limits.hpp"
#include "inside/seccomp_load.hpp"
#include "sys/records.hpp"
#include "wire/exit_status.hpp"
#include "wire/report.hpp"

namespace pysandbox::init {
namespace {

// Signals the supervisor forwards. PID 1 of a namespace only receives a signal it has a handler
// for, so each gets an empty one; the signals stay blocked and are taken with sigwaitinfo().
// SIGCHLD gets the same handler. The interpreter's process puts back the actions that were there.
constexpr int kSaved[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD};
constexpr std::size_t kSavedCount = std::size(kSaved);

void on_signal(int) {}

void send_report(const Report& report) noexcept {
    while (::write(kReportFd, &report, sizeof report) < 0 && errno == EINTR) {
    }
}

// The script's resource limits are set here, in its own process, rather than in init: init needs
// none of them, and an address-space limit below what a sanitizer build's init has already
// mapped made its next mmap fail. Before seccomp, which the script runs under; all but the
// open-files limit, which waits until the listener is out (step_limit_open_files).
int set_rlimits(ChildContext& ctx, limits::Which which) noexcept {
    if (const Rlimit* refused = limits::set_rlimits(ctx.plan, which))
        return step_fail(ctx, "setrlimit(%d, %llu, %llu)", refused->resource,
                         static_cast<unsigned long long>(refused->soft),
                         static_cast<unsigned long long>(refused->hard));
    return 0;
}

// Under gVisor, runsc's user namespace, made here. runsc wants CAP_SYS_ADMIN and CAP_SYS_CHROOT; a
// runsc without them starts itself again (/proc/self/exe) in a new user and mount namespace where
// it is root, mapped to its own ids, and waits for that copy: a second start of a large Go
// program, 40 to 100 ms of a cold run. These are the same namespaces, made before the one
// execve, so runsc runs once; nothing above them changes (its capabilities are the new user
// namespace's, over nothing of the sandbox's, whose mounts are locked to it).
int write_id_map(ChildContext& ctx, const char* file, unsigned id) noexcept {
    char line[32];
    const int length = std::snprintf(line, sizeof line, "0 %u 1\n", id);
    const int fd = ::open(file, O_WRONLY | O_CLOEXEC);
    const bool written = fd >= 0 && ::write(fd, line, static_cast<std::size_t>(length)) == length;
    const int error = errno;
    if (fd >= 0) ::close(fd);
    errno = error;
    return written ? 0 : step_fail(ctx, "write(%s, \"0 %u 1\")", file, id);
}

int step_enter_runsc_user_namespace(ChildContext& ctx) noexcept {
    if (!ctx.plan.gvisor) return 0;
    const uid_t uid = ::getuid();
    const gid_t gid = ::getgid();
    // Its /proc/self files are root's while it is not dumpable (start_interpreter), and execve
    // would make it dumpable next anyway: no script exists yet, only init, which stays not.
    ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
        return step_fail(ctx, "unshare(CLONE_NEWUSER | CLONE_NEWNS)");
    const int fd = ::open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
    const bool denied = fd >= 0 && ::write(fd, "deny", 4) == 4;
    if (fd >= 0) ::close(fd);
    if (!denied) return step_fail(ctx, "write(/proc/self/setgroups, \"deny\")");
    if (int rc = write_id_map(ctx, "/proc/self/uid_map", uid); rc != 0) return rc;
    return write_id_map(ctx, "/proc/self/gid_map", gid);
}

int step_set_rlimits(ChildContext& ctx) noexcept {
    return set_rlimits(ctx, limits::Which::all_but_open_files);
}

// After the listener is sent (limits.hpp, Which): under seccomp, which allows prlimit64.
int step_limit_open_files(ChildContext& ctx) noexcept {
    return set_rlimits(ctx, limits::Which::open_files);
}

// Seccomp comes last, in the interpreter's own process, so nothing the sandbox does needs an
// exception in the filter. The listener goes to the supervisor and is closed here: the script
// must never hold it, or it could answer its own denied calls.
int step_load_seccomp(ChildContext& ctx) noexcept {
    if (!ctx.plan.seccomp_listener) {
        const int rc = seccomp::load_without_listener(ctx.plan.seccomp_program);
        errno = -rc;
        return rc < 0 ? step_fail(ctx, "seccomp(SECCOMP_SET_MODE_FILTER)") : 0;
    }
    const int listener = seccomp::load(ctx.plan.seccomp_program);
    if (listener < 0) {
        errno = -listener;
        return step_fail(ctx, "seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER)");
    }
    Report report{};
    report.kind = ReportKind::listener;
    const ssize_t sent = sys::send_record(kReportFd, &report, sizeof report, listener);
    const int error = errno;
    ::close(listener);
    errno = error;
    return sent < 0 ? step_fail(ctx, "sendmsg(seccomp listener)") : 0;
}

// Returns only when execve failed.
int step_exec_interpreter(ChildContext& ctx) noexcept {
    const Plan& plan = ctx.plan;
    const char* program = plan.gvisor ? plan.gvisor->runsc.c_str() : plan.interpreter.c_str();
    ::execve(program, const_cast<char* const*>(plan.argv_ptrs.data()),
             const_cast<char* const*>(plan.envp_ptrs.data()));
    return step_fail(ctx, "execve(%s)", program);
}

// Under gVisor the interpreter's process is runsc, which exits as the container's first process
// did, 128 + N for a signal: a status the script can exit with too, so the status alone says
// nothing of runsc. runsc's log does (--debug-log, plan/gvisor.cpp), in the state directory that
// neither the script nor gVisor's sandbox can write: on its way out through its success path runsc
// logs "Exiting with status: W", W the raw wait status it passes on, and when gVisor's sandbox
// process went away without telling the container's end, it first warns that it "will try waiting
// on the sandbox process instead": W is then that process's own. Nothing the script says reaches
// this log (the run command logs its own arguments, not the container's).
struct RunscEnd {
    enum class Kind {
        script,          // gVisor told runsc how the script ended: runsc's status is the script's
        runsc_failed,    // runsc, not the script: the why in ChildContext::detail
        sandbox_killed,  // SIGKILL ended gVisor's sandbox process (a limit's, or a kill)
    };
    Kind kind = Kind::script;
    int signal = 0;  // sandbox_killed: which
};

// The log's last 64 KiB, whole lines: runsc's run writes about 40 of them, the ones read here last.
char g_runsc_log[64 * 1024];

std::string_view read_runsc_log(const char* path) noexcept {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return {};
    const off_t size = ::lseek(fd, 0, SEEK_END);
    const off_t from = size > static_cast<off_t>(sizeof g_runsc_log)
                           ? size - static_cast<off_t>(sizeof g_runsc_log)
                           : 0;
    const ssize_t got = ::pread(fd, g_runsc_log, sizeof g_runsc_log, from);
    ::close(fd);
    std::string_view text(g_runsc_log, got > 0 ? static_cast<std::size_t>(got) : 0);
    if (from > 0) text.remove_prefix(std::min(text.find('\n') + 1, text.size()));
    return text;
}

RunscEnd judge_runsc(ChildContext& ctx, int status) noexcept {
    const Plan::Gvisor& gvisor = *ctx.plan.gvisor;
    constexpr RunscEnd kFailed{RunscEnd::Kind::runsc_failed, 0};
    // runsc never ends by a signal of its own: it passes the script's on as 128 + N.
    if (!WIFEXITED(status)) {
        std::snprintf(ctx.detail, sizeof ctx.detail, "runsc was killed by signal %d",
                      WTERMSIG(status));
        return kFailed;
    }
    if (::access(gvisor.started_file.c_str(), F_OK) != 0) {
        std::snprintf(ctx.detail, sizeof ctx.detail,
                      "runsc exited with %d before its container existed (its message is on "
                      "stderr; pysandbox doctor checks gVisor)",
                      WEXITSTATUS(status));
        return kFailed;
    }
    bool sandbox_gone = false;
    std::optional<long> passed_on;  // W of "Exiting with status: W", the last one
    std::string_view log = read_runsc_log(gvisor.log_file.c_str());
    while (!log.empty()) {
        const std::string_view line = log.substr(0, log.find('\n'));
        log.remove_prefix(std::min(line.size() + 1, log.size()));
        constexpr std::string_view kFallback = "Will try waiting on the sandbox process instead";
        constexpr std::string_view kExiting = "] Exiting with status: ";
        if (line.starts_with('W') && line.find(kFallback) != std::string_view::npos)
            sandbox_gone = true;
        const std::size_t at = line.find(kExiting);
        if (!line.starts_with('I') || at == std::string_view::npos) continue;
        const std::string_view number = line.substr(at + kExiting.size());
        long value = 0;
        const auto [end, error] =
            std::from_chars(number.data(), number.data() + number.size(), value);
        if (error == std::errc{} && end == number.data() + number.size()) passed_on = value;
    }
    if (!passed_on) {
        std::snprintf(ctx.detail, sizeof ctx.detail,
                      "runsc exited with %d without saying how the script ended (its message is "
                      "on stderr; its log has no exit status): runsc failed, not the script",
                      WEXITSTATUS(status));
        return kFailed;
    }
    const int sandbox_status = static_cast<int>(*passed_on);
    if (!sandbox_gone) return {};
    // Only SIGKILL is the script's end: gVisor's sandbox process passes the script every signal
    // it can catch (a host kill -TERM ends the script with 128 + 15, as runsc says), so what else
    // ends it is its own seccomp filter's SIGSYS (gVisor's kernel made a call runsc forbids it: a
    // bug of gVisor's, or an attack on it), which must never read as the script's.
    if (WIFSIGNALED(sandbox_status) && WTERMSIG(sandbox_status) == SIGKILL)
        return {RunscEnd::Kind::sandbox_killed, SIGKILL};
    if (WIFSIGNALED(sandbox_status))
        std::snprintf(ctx.detail, sizeof ctx.detail,
                      "gVisor's sandbox process was killed by signal %d (%s): runsc failed, not "
                      "the script",
                      WTERMSIG(sandbox_status),
                      WTERMSIG(sandbox_status) == SIGSYS ? "its own seccomp filter: gVisor made a "
                                                           "call it never should"
                                                         : "not a limit's");
    else
        std::snprintf(ctx.detail, sizeof ctx.detail,
                      "gVisor's sandbox process ended (wait status %d) without reporting the "
                      "script's end: runsc failed, not the script",
                      sandbox_status);
    return kFailed;
}

std::int64_t monotonic_ns() noexcept {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// The interpreter's own process, between fork and execve: the second step table. Its first step
// is init's fork() (run_init); the rest run in the new process.
constexpr Step kInterpreterSteps[] = {
    {"start the interpreter's process", nullptr},
    {"enter runsc's user namespace", step_enter_runsc_user_namespace},
    {"set the script's resource limits", step_set_rlimits},
    {"load the seccomp filter", step_load_seccomp},
    {"limit open files", step_limit_open_files},
    {"execute the interpreter", step_exec_interpreter},
};
constexpr int kInterpreterStepCount = static_cast<int>(std::size(kInterpreterSteps));

// The interpreter's process, between init's fork and the execve (or, in a forked job, the return
// to the zygote's interpreter): the actions init gave the signals it forwards are the zygote's
// again, nothing is blocked, and its steps run up to the last, the execve, which the caller runs.
void become_interpreter(ChildContext& ctx, int first_step,
                        const struct sigaction (&saved)[kSavedCount]) noexcept {
    for (std::size_t i = 0; i < kSavedCount; ++i) ::sigaction(kSaved[i], &saved[i], nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int i = 1; i < kInterpreterStepCount - 1; ++i) {
        errno = 0;
        if (int rc = kInterpreterSteps[i].run(ctx); rc != 0)
            fail_step(ctx, ReportKind::setup_failed, first_step + i, -rc);
    }
}

Report usage_report(int wait_status, std::int64_t exec_ns) noexcept {
    Report report{};
    report.kind = ReportKind::exited;
    report.wait_status = wait_status;
    report.exec_mono_ns = exec_ns;
    rusage usage{};
    ::getrusage(RUSAGE_CHILDREN, &usage);
    auto micros = [](const timeval& tv) {
        return static_cast<std::int64_t>(tv.tv_sec) * 1'000'000 + tv.tv_usec;
    };
    report.cpu_us = micros(usage.ru_utime) + micros(usage.ru_stime);
    report.max_rss_kib = usage.ru_maxrss;
    return report;
}

}  // namespace

const char* interpreter_step_name(int index) noexcept {
    if (index < 0 || index >= kInterpreterStepCount) return nullptr;
    return kInterpreterSteps[index].name;
}

void start_interpreter(ChildContext& ctx, int first_step) noexcept {
    struct sigaction saved[kSavedCount];
    struct sigaction action {};
    action.sa_handler = on_signal;
    for (std::size_t i = 0; i < kSavedCount; ++i) ::sigaction(kSaved[i], &action, &saved[i]);
    sigset_t all;
    sigfillset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);

    const std::int64_t exec_ns = monotonic_ns();
    // Not dumpable, before the script exists: it (same uid) must never open /proc/1/mem or
    // /proc/1/fd/* to reach init or its report socket. The script's process is made dumpable
    // again: by execve, or here for a forked job.
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    // _Fork, not fork: no atfork handlers and no malloc locks, which in a sandbox cloned from a
    // multithreaded process (the kernel program) may be held by threads the clone left behind.
    const pid_t script = ::_Fork();
    if (script < 0) {
        const int error = errno;
        step_fail(ctx, "fork() for the interpreter");
        fail_step(ctx, ReportKind::setup_failed, first_step, error);
    }
    if (script == 0) {
        if (ctx.birth == Birth::forked) ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
        become_interpreter(ctx, first_step, saved);
        // What execve's close-on-exec does for a cloned sandbox: the report socket is init's
        // alone, and a job that could write to it could forge its own verdict.
        if (ctx.birth == Birth::forked) ::close(kReportFd);
        return;
    }

    int script_status = 0;
    bool script_done = false;
    for (;;) {
        siginfo_t info{};
        int sig = ::sigwaitinfo(&all, &info);
        if (sig < 0) continue;
        if (sig != SIGCHLD) {
            // A stopped script would only see the signal once continued: continue it.
            if (!script_done && ::kill(script, sig) == 0) ::kill(script, SIGCONT);
            continue;
        }
        int status = 0;
        pid_t pid;
        while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
            if (pid != script) continue;
            script_status = status;
            script_done = true;
        }
        if (!script_done) continue;
        // The script is gone; nothing it started may outlive it.
        ::kill(-1, SIGKILL);
        while (::waitpid(-1, &status, 0) > 0 || errno == EINTR) {
        }
        if (ctx.plan.gvisor) {
            const RunscEnd end = judge_runsc(ctx, script_status);
            if (end.kind == RunscEnd::Kind::runsc_failed)
                fail_step(ctx, ReportKind::setup_failed, first_step + kInterpreterStepCount - 1,
                          ECANCELED);
            // The host's kernel sent it: the script's end as on the host kernel, where the CPU
            // and memory limits' verdicts judge it (report/status.cpp).
            if (end.kind == RunscEnd::Kind::sandbox_killed) script_status = end.signal;
        }
        send_report(usage_report(script_status, exec_ns));
        ::_exit(0);
    }
}

void run_init(ChildContext& ctx, int first_step) noexcept {
    start_interpreter(ctx, first_step);
    ::signal(SIGPIPE, SIG_DFL);  // the supervisor ignores it; exec keeps ignored signals ignored
    constexpr int kExec = kInterpreterStepCount - 1;
    errno = 0;
    const int rc = kInterpreterSteps[kExec].run(ctx);
    fail_step(ctx, rc != 0 ? ReportKind::exec_failed : ReportKind::setup_failed, first_step + kExec,
              rc != 0 ? -rc : ENOEXEC);  // execve returns only when it failed
}

}  // namespace pysandbox::init
