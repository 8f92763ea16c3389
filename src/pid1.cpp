#include "pid1.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "limits.hpp"
#include "report.hpp"
#include "seccomp.hpp"
#include "sys/records.hpp"

namespace pysandbox::pid1 {
namespace {

// Signals the supervisor forwards. PID 1 of a namespace only receives a signal it has a handler
// for, so each gets an empty one; the signals stay blocked and are taken with sigwaitinfo().
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

void on_signal(int) {}

void send_report(const Report& report) noexcept {
    while (::write(kReportFd, &report, sizeof report) < 0 && errno == EINTR) {
    }
}

[[noreturn]] void fail_before_exec(const char* what, int error) noexcept {
    Report failed{};
    failed.kind = ReportKind::setup_failed;
    failed.step = -1;
    failed.error = error;
    std::snprintf(failed.detail, sizeof failed.detail, "%s", what);
    send_report(failed);
    ::_exit(125);
}

// Seccomp comes last, in the interpreter's own process, so nothing the sandbox does needs an
// exception in the filter. The listener goes to the supervisor and is closed here: the script
// must never hold it, or it could answer its own denied calls.
void install_seccomp(const Plan& plan) noexcept {
    int listener = seccomp::load(plan.seccomp_program);
    if (listener < 0) fail_before_exec("seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER)", -listener);
    Report report{};
    report.kind = ReportKind::listener;
    ssize_t sent = sys::send_record(kReportFd, &report, sizeof report, listener);
    int error = errno;
    ::close(listener);
    if (sent < 0) fail_before_exec("sendmsg(seccomp listener)", error);
}

std::int64_t monotonic_ns() noexcept {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

[[noreturn]] void exec_interpreter(const Plan& plan) noexcept {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);  // the supervisor ignores it; exec keeps ignored signals ignored
    // The script's resource limits are set here, in its own process, rather than in init: init
    // needs none of them, and an address-space limit below what a sanitizer build's init has
    // already mapped made its next mmap fail. Before seccomp, which the script runs under.
    if (const Rlimit* refused = limits::set_rlimits(plan)) {
        const int error = errno;
        char what[96];
        std::snprintf(what, sizeof what, "setrlimit(%d, %llu, %llu)", refused->resource,
                      static_cast<unsigned long long>(refused->soft),
                      static_cast<unsigned long long>(refused->hard));
        fail_before_exec(what, error);
    }
    install_seccomp(plan);

    ::execve(plan.interpreter.c_str(), const_cast<char* const*>(plan.argv_ptrs.data()),
             const_cast<char* const*>(plan.envp_ptrs.data()));
    Report failed{};
    failed.kind = ReportKind::exec_failed;
    failed.error = errno;
    std::snprintf(failed.detail, sizeof failed.detail, "execve(%s)", plan.interpreter.c_str());
    send_report(failed);
    ::_exit(127);
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

void run_init(ChildContext& ctx) noexcept {
    struct sigaction action {};
    action.sa_handler = on_signal;
    for (int sig : kForwarded) ::sigaction(sig, &action, nullptr);
    ::sigaction(SIGCHLD, &action, nullptr);
    sigset_t all;
    sigfillset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);

    const std::int64_t exec_ns = monotonic_ns();
    // Not dumpable, before the script exists: it (same uid) must never open /proc/1/mem or
    // /proc/1/fd/* to reach init or its report socket. execve makes the script dumpable again.
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    const pid_t script = ::fork();
    if (script < 0) fail_before_exec("fork() for the interpreter", errno);
    if (script == 0) exec_interpreter(ctx.plan);

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
        send_report(usage_report(script_status, exec_ns));
        ::_exit(0);
    }
}

}  // namespace pysandbox::pid1
