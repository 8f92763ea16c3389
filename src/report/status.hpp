#pragma once
// What a run's Outcome amounts to, in one word callers switch on (the result's `status`), and the
// evidence each limit's status rests on: facts from the kernel and the supervisor, never the
// script's word. report/result.hpp tells it.

#include <optional>
#include <string_view>

#include "plan/plan.hpp"
#include "report/outcome.hpp"
#include "report/traceback.hpp"

namespace pysandbox {

// What callers switch on. Exactly one applies; the first that fits, in this order:
// sandbox_error, policy_violation, timeout, memory_limit, cpu_limit, killed, exception,
// output_limit, error, ok.
enum class Status {
    ok,                // exit 0, output complete
    error,             // a non-zero exit without an uncaught exception
    exception,         // an uncaught Python exception (SyntaxError included)
    timeout,           // the wall-clock limit
    memory_limit,      // MemoryError under the limit, or killed by the out-of-memory killer
    cpu_limit,         // the CPU-time limit
    output_limit,      // the output went over its cap and was cut in the middle
    killed,            // a signal that no limit explains, or pysandbox was interrupted
    policy_violation,  // a denied system call ended the sandbox (seccomp action "kill"), or the
                       // script failed after the [policy] audit hook refused something
    sandbox_error,     // pysandbox could not set up or start the script; it did not run
};
std::string_view to_string(Status status);

// The exception Python printed, when its stderr (captured, or the tail `run` kept as it passed
// through) ends in one. `script_file` is
// the program's name in tracebacks when it is not the plan's (a session's "<cell-3>").
std::optional<PythonException> find_exception(const Plan& plan, const Outcome& outcome,
                                              std::string_view script_file = {});

Status classify(const Plan& plan, const Outcome& outcome,
                const std::optional<PythonException>& exception);

// The evidence (status.cpp says what counts): the CPU-time limit, the memory limit, output cut
// by its limit, and a [policy] hook that should have reported itself installed and did not.
bool hit_cpu_limit(const Plan& plan, const Outcome& outcome);
bool hit_memory_limit(const Plan& plan, const Outcome& outcome,
                      const std::optional<PythonException>& exception);
bool output_truncated(const Outcome& outcome);
bool hook_missing(const Plan& plan, const Outcome& outcome);

}  // namespace pysandbox
