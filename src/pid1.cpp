#include "pid1.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "report.hpp"

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
    const pid_t script = ::fork();
    if (script < 0) {
        Report failed{};
        failed.kind = ReportKind::setup_failed;
        failed.error = errno;
        std::snprintf(failed.detail, sizeof failed.detail, "fork() for the interpreter");
        send_report(failed);
        ::_exit(125);
    }
    if (script == 0) exec_interpreter(ctx.plan);

    int script_status = 0;
    bool script_done = false;
    for (;;) {
        siginfo_t info{};
        int sig = ::sigwaitinfo(&all, &info);
        if (sig < 0) continue;
        if (sig != SIGCHLD) {
            if (!script_done) ::kill(script, sig);
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
