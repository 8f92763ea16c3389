#pragma once
// How an Outcome is told: to a person, nothing when the script ran and ended on its own and one
// line on stderr when the sandbox (not the script) stopped something; to a program, one JSON
// object (schema pysandbox.result/v1, documented field by field in the man page).

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "plan/plan.hpp"
#include "report/outcome.hpp"
#include "report/traceback.hpp"

namespace pysandbox {

inline constexpr std::string_view kResultSchema = "pysandbox.result/v1";

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

// The exception Python printed, when the output was captured and ends in one. `script_file` is
// the program's name in tracebacks when it is not the plan's (a session's "<cell-3>").
std::optional<PythonException> find_exception(const Plan& plan, const Outcome& outcome,
                                              std::string_view script_file = {});

Status classify(const Plan& plan, const Outcome& outcome,
                const std::optional<PythonException>& exception);

// The line for stderr (without "pysandbox: " and newline), or empty.
std::string human_summary(const Plan& plan, const Outcome& outcome);

// The whole result, for --json; `exit_code` is pysandbox's own (exit_codes::for_outcome).
// Takes the outcome by value: the captured output (up to the output limit, three times) moves
// into the JSON instead of being copied.
nlohmann::ordered_json result_json(const Plan& plan, Outcome outcome, int exit_code,
                                   std::string_view script_file = {});

// The result when pysandbox failed before a sandbox existed (usage, profile, host set-up).
nlohmann::ordered_json early_error_json(std::string_view message, std::string_view profile);

}  // namespace pysandbox
