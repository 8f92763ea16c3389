#include "report/status.hpp"

#include <signal.h>

#include <cstdint>

namespace pysandbox {

using Kind = Outcome::Kind;

std::string_view to_string(Status status) {
    switch (status) {
        case Status::ok: return "ok";
        case Status::error: return "error";
        case Status::exception: return "exception";
        case Status::timeout: return "timeout";
        case Status::memory_limit: return "memory_limit";
        case Status::cpu_limit: return "cpu_limit";
        case Status::output_limit: return "output_limit";
        case Status::killed: return "killed";
        case Status::policy_violation: return "policy_violation";
        case Status::sandbox_error: return "sandbox_error";
    }
    return "sandbox_error";
}

namespace {

// An exception raised inside multiprocessing (or concurrent.futures' process pool, built on
// it) where the profile allows no child processes: without /dev/shm its first lock fails with a
// FileNotFoundError that names no file. The profile that allows them is the cure.
void explain_multiprocessing(const Plan& plan, PythonException& exception) {
    if (plan.profile.seccomp.allow_processes ||
        exception.traceback.find("/multiprocessing/") == std::string::npos)
        return;
    exception.hint = "multiprocessing needs child processes and /dev/shm, which profile " +
                     plan.profile.name +
                     " does not allow (seccomp.allow_processes); the shipped profile "
                     "datascience allows them: -p datascience";
}

}  // namespace

std::optional<PythonException> find_exception(const Plan& plan, const Outcome& outcome,
                                              std::string_view script_file) {
    // Python reports an uncaught exception with exit status 1, and only then.
    if (outcome.kind != Kind::exited || outcome.exit_code != 1) return std::nullopt;
    // Captured (--json) or, as it passed through, the last of it.
    const std::string_view text =
        outcome.captured ? std::string_view(outcome.captured->stderr_text) : outcome.stderr_tail;
    std::optional<PythonException> exception =
        parse_python_exception(text, script_file.empty() ? plan.script_file : script_file);
    if (exception) explain_multiprocessing(plan, *exception);
    return exception;
}

Status classify(const Plan& plan, const Outcome& outcome,
                const std::optional<PythonException>& exception) {
    switch (outcome.kind) {
        case Kind::setup_failed:
        case Kind::exec_failed:
        case Kind::zygote_lost: return Status::sandbox_error;
        case Kind::policy_violation: return Status::policy_violation;
        case Kind::timeout: return Status::timeout;
        case Kind::interrupted:
        case Kind::lost: return Status::killed;
        case Kind::signaled:
        case Kind::exited: break;
    }
    // The cgroup's count first, then the CPU limit's signals, then the other signs of memory.
    if (outcome.oom_kills > 0 && outcome.kind != Kind::exited) return Status::memory_limit;
    if (hit_cpu_limit(plan, outcome)) return Status::cpu_limit;
    if (hit_memory_limit(plan, outcome, exception)) return Status::memory_limit;
    if (outcome.kind == Kind::signaled) return Status::killed;
    // The audit hook refused something and the script did not recover: that is why it failed.
    if (!outcome.policy.blocks.empty() && outcome.exit_code != 0) return Status::policy_violation;
    if (exception) return Status::exception;
    if (output_truncated(outcome)) return Status::output_limit;
    return outcome.exit_code == 0 ? Status::ok : Status::error;
}

bool output_truncated(const Outcome& outcome) {
    return outcome.stdout_omitted + outcome.stderr_omitted > 0;
}

// Evidence from the kernel or the supervisor's own measure (under gVisor, which ends the sandbox at
// the CPU limit itself), never the script's word: a script can send itself SIGXCPU or raise
// MemoryError. RLIMIT_CPU sends SIGXCPU at the limit and SIGKILL a second later; the kernel counts
// the limit in scheduler ticks and getrusage() in run time, which on a busy or virtual machine
// differ by up to a quarter, so the measured CPU time must reach half the limit.
bool hit_cpu_limit(const Plan& plan, const Outcome& outcome) {
    if (outcome.cpu_limit_reached) return true;
    if (outcome.kind != Kind::signaled) return false;
    if (outcome.signal != SIGXCPU && outcome.signal != SIGKILL) return false;
    return 2 * outcome.session_cpu_ms.value_or(outcome.cpu_ms) >=
           plan.profile.limits.cpu_time.count();
}

// The cgroup's out-of-memory kills, or an allocation failure (MemoryError, or a crash of code
// that does not check) while the measured peak was at least half the limit or the supervisor saw
// an allocation the address-space limit refused (memory Python asks for and never touches, a
// big bytearray or calloc, is not resident: the peak alone misses it).
bool hit_memory_limit(const Plan& plan, const Outcome& outcome,
                      const std::optional<PythonException>& exception) {
    if (outcome.oom_kills > 0 && outcome.kind != Kind::exited) return true;
    const bool failed =
        (outcome.kind == Kind::exited && outcome.exit_code != 0 && exception &&
         exception->type == "MemoryError") ||
        (outcome.kind == Kind::signaled &&
         (outcome.signal == SIGKILL || outcome.signal == SIGSEGV || outcome.signal == SIGABRT));
    const std::uint64_t peak = static_cast<std::uint64_t>(outcome.max_rss_kib) * 1024;
    return failed && (outcome.allocation_refused || 2 * peak >= plan.profile.limits.memory);
}

bool hook_missing(const Plan& plan, const Outcome& outcome) {
    const bool script_ran = outcome.kind == Kind::exited || outcome.kind == Kind::signaled;
    return script_ran && plan.profile.policy.wants_hook() && !outcome.policy.hook_installed;
}

}  // namespace pysandbox
