// The exit status contract (README.md, "Exit codes") and the one line a person is told.

#include <doctest/doctest.h>

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "engine/run_watch.hpp"
#include "report/exit_codes.hpp"
#include "report/result.hpp"

using namespace std::chrono_literals;
using pysandbox::Outcome;
using Kind = pysandbox::Outcome::Kind;
namespace exit_codes = pysandbox::exit_codes;

namespace {

Outcome outcome(Kind kind) {
    Outcome o;
    o.kind = kind;
    return o;
}

Outcome exited(int code) {
    Outcome o = outcome(Kind::exited);
    o.exit_code = code;
    return o;
}

Outcome with_signal(Kind kind, int sig) {
    Outcome o = outcome(kind);
    o.signal = sig;
    return o;
}

Outcome with_error(Kind kind, int error, std::string step, std::string detail) {
    Outcome o = outcome(kind);
    o.error = error;
    o.step = std::move(step);
    o.detail = std::move(detail);
    return o;
}

pysandbox::Plan plan_with_limits(std::chrono::milliseconds wall, std::chrono::milliseconds cpu) {
    pysandbox::Plan plan;
    plan.profile.limits.wall_time = wall;
    plan.profile.limits.cpu_time = cpu;
    plan.interpreter = "/usr/bin/python3";
    return plan;
}

}  // namespace

TEST_SUITE("exit codes") {
    TEST_CASE("the documented numbers") {
        CHECK(exit_codes::kTimeout == 124);
        CHECK(exit_codes::kSandboxError == 125);
        CHECK(exit_codes::kNotExecutable == 126);
        CHECK(exit_codes::kNotFound == 127);
        CHECK(exit_codes::kSignalBase == 128);
    }

    TEST_CASE("exited: the script's own status passes through") {
        CHECK(exit_codes::for_outcome(exited(0)) == 0);
        CHECK(exit_codes::for_outcome(exited(3)) == 3);
        CHECK(exit_codes::for_outcome(exited(124)) == 124);
        CHECK(exit_codes::for_outcome(exited(255)) == 255);
    }

    TEST_CASE("signaled: 128 + N") {
        CHECK(exit_codes::for_outcome(with_signal(Kind::signaled, SIGKILL)) == 137);
        CHECK(exit_codes::for_outcome(with_signal(Kind::signaled, SIGSEGV)) == 139);
        CHECK(exit_codes::for_outcome(with_signal(Kind::signaled, SIGXCPU)) == 152);
        CHECK(exit_codes::for_outcome(with_signal(Kind::signaled, SIGABRT)) == 134);
    }

    TEST_CASE("timeout: 124, as timeout(1)") {
        CHECK(exit_codes::for_outcome(outcome(Kind::timeout)) == 124);
        // Whatever signal ended the sandbox, the deadline is what the caller is told about.
        CHECK(exit_codes::for_outcome(with_signal(Kind::timeout, SIGKILL)) == 124);
    }

    TEST_CASE("interrupted: 128 + the signal pysandbox got") {
        CHECK(exit_codes::for_outcome(with_signal(Kind::interrupted, SIGINT)) == 130);
        CHECK(exit_codes::for_outcome(with_signal(Kind::interrupted, SIGTERM)) == 143);
        CHECK(exit_codes::for_outcome(with_signal(Kind::interrupted, SIGHUP)) == 129);
    }

    TEST_CASE("setup_failed: 125, never the script's") {
        CHECK(exit_codes::for_outcome(with_error(Kind::setup_failed, EPERM, "mount", "")) == 125);
        CHECK(exit_codes::for_outcome(outcome(Kind::setup_failed)) == 125);
    }

    TEST_CASE("exec_failed: 127 not found, 126 not executable") {
        CHECK(exit_codes::for_outcome(with_error(Kind::exec_failed, ENOENT, "", "")) == 127);
        CHECK(exit_codes::for_outcome(with_error(Kind::exec_failed, ENOTDIR, "", "")) == 127);
        CHECK(exit_codes::for_outcome(with_error(Kind::exec_failed, EACCES, "", "")) == 126);
        CHECK(exit_codes::for_outcome(with_error(Kind::exec_failed, ENOEXEC, "", "")) == 126);
        CHECK(exit_codes::for_outcome(with_error(Kind::exec_failed, EPERM, "", "")) == 126);
    }

    TEST_CASE("lost: 128 + the signal when known, else 125") {
        CHECK(exit_codes::for_outcome(with_signal(Kind::lost, SIGKILL)) == 137);
        CHECK(exit_codes::for_outcome(with_signal(Kind::lost, 0)) == 125);
    }

    TEST_CASE("policy_violation: 128 + SIGSYS, as a seccomp kill") {
        CHECK(exit_codes::for_outcome(outcome(Kind::policy_violation)) == 128 + SIGSYS);
    }
}

TEST_SUITE("human summary") {
    const pysandbox::Plan plan = plan_with_limits(5000ms, 2000ms);

    TEST_CASE("nothing when the script ended on its own and well, or its traceback says why") {
        CHECK(pysandbox::human_summary(plan, exited(0)).empty());
        Outcome raised = exited(1);
        raised.stderr_tail =
            "Traceback (most recent call last):\n  File \"<string>\", line 1, in "
            "<module>\nZeroDivisionError: division by zero\n";
        CHECK(pysandbox::human_summary(plan, raised).empty());
        CHECK(pysandbox::human_summary(plan, with_signal(Kind::signaled, SIGSEGV)).empty());
        CHECK(pysandbox::human_summary(plan, with_signal(Kind::signaled, SIGKILL)).empty());
    }

    TEST_CASE("a failing status that no traceback explains is said") {
        CHECK(pysandbox::human_summary(plan, exited(3)) == "exited with status 3");
        CHECK(pysandbox::human_summary(plan, exited(1)) == "exited with status 1");
    }

    TEST_CASE("a MemoryError at the memory limit names the limit") {
        pysandbox::Plan limited = plan_with_limits(5000ms, 2000ms);
        limited.profile.limits.memory = 64ULL << 20;
        Outcome o = exited(1);
        o.stderr_tail =
            "Traceback (most recent call last):\n  File \"<string>\", line 1, in "
            "<module>\nMemoryError\n";
        o.max_rss_kib = 60 * 1024;
        CHECK(pysandbox::human_summary(limited, o) ==
              "memory limit of 64MiB reached (MemoryError)");
        o.max_rss_kib = 1024;  // far below it, and no refused allocation: the script's own word
        CHECK(pysandbox::human_summary(limited, o).empty());
    }

    TEST_CASE("the wall-clock line names the limit") {
        CHECK(pysandbox::human_summary(plan, outcome(Kind::timeout)) ==
              "wall-clock limit of 5s reached; the sandbox was killed");
        CHECK(pysandbox::human_summary(plan_with_limits(1500ms, 1s), outcome(Kind::timeout)) ==
              "wall-clock limit of 1500ms reached; the sandbox was killed");
        CHECK(pysandbox::human_summary(plan_with_limits(2min, 1s), outcome(Kind::timeout)) ==
              "wall-clock limit of 2m reached; the sandbox was killed");
    }

    TEST_CASE("the CPU line names the CPU limit") {
        Outcome o = with_signal(Kind::signaled, SIGXCPU);
        o.cpu_ms = 2000;
        CHECK(pysandbox::human_summary(plan, o) ==
              "CPU time limit of 2s reached; the script was killed");
        o.cpu_ms = 10;  // a SIGXCPU the script sent itself
        CHECK(pysandbox::human_summary(plan, o).empty());
    }

    TEST_CASE("interrupted names the signal") {
        CHECK(pysandbox::human_summary(plan, with_signal(Kind::interrupted, SIGINT)) ==
              "interrupted by SIGINT; the sandbox was stopped");
        CHECK(pysandbox::human_summary(plan, with_signal(Kind::interrupted, SIGTERM)) ==
              "interrupted by SIGTERM; the sandbox was stopped");
    }

    TEST_CASE("setup_failed names the step, the call and the error") {
        Outcome o = with_error(Kind::setup_failed, EPERM, "mount", "mount(/usr -> /newroot/usr)");
        CHECK(pysandbox::human_summary(plan, o) ==
              "sandbox setup failed at step \"mount\": mount(/usr -> /newroot/usr): Operation "
              "not permitted; the script was not run");
    }

    TEST_CASE("exec_failed says whether the interpreter is missing or not executable") {
        CHECK(pysandbox::human_summary(plan, with_error(Kind::exec_failed, ENOENT, "", "")) ==
              "interpreter /usr/bin/python3 not found inside the sandbox; is its directory in "
              "filesystem.ro?");
        CHECK(pysandbox::human_summary(
                  plan, with_error(Kind::exec_failed, EACCES, "", "execve(/usr/bin/python3)")) ==
              "interpreter /usr/bin/python3 cannot be executed (execve(/usr/bin/python3): "
              "Permission denied)");
    }

    TEST_CASE("lost says the sandbox was killed from outside") {
        CHECK(pysandbox::human_summary(plan, with_signal(Kind::lost, SIGKILL)) ==
              "the sandbox was killed from outside (SIGKILL)");
        CHECK(pysandbox::human_summary(plan, with_signal(Kind::lost, 0)) ==
              "the sandbox was killed from outside");
    }

    TEST_CASE("policy_violation names the system call") {
        Outcome o = outcome(Kind::policy_violation);
        o.killing_syscall = "ptrace";
        CHECK(pysandbox::human_summary(plan, o) ==
              "system call ptrace is denied by the sandbox policy; the sandbox was killed");
    }

    TEST_CASE("signal_name") {
        CHECK(pysandbox::signal_name(SIGKILL) == "SIGKILL");
        CHECK(pysandbox::signal_name(SIGINT) == "SIGINT");
        CHECK(pysandbox::signal_name(SIGXCPU) == "SIGXCPU");
        CHECK(pysandbox::signal_name(200) == "signal 200");
    }
}
