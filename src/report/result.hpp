#pragma once
// How an Outcome is told (its status is report/status.hpp's): to a person, nothing when the script
// ran and ended on its own and one line on stderr when the sandbox (not the script) stopped
// something; to a program, one JSON object (schema pysandbox.result/v1, documented field by field
// in the man page).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/plan.hpp"
#include "report/outcome.hpp"
#include "report/status.hpp"

namespace pysandbox {

inline constexpr std::string_view kResultSchema = "pysandbox.result/v1";

// The line for stderr (without "pysandbox: " and newline), or empty; also the result's
// `message`. What stopped the script, when the sandbox did (a limit), or the status it exited
// with when no traceback says why. `exception` is find_exception's (status.hpp); without it, it
// is looked for.
std::string human_summary(const Plan& plan, const Outcome& outcome);
std::string human_summary(const Plan& plan, const Outcome& outcome,
                          const std::optional<PythonException>& exception);

// What a person at a shell would not learn otherwise, one line each (without "pysandbox: "):
// the hint for the exception the script ended in (the JSON's exception.hint), and the files it
// left in /tmp/work that are not on the host (without --output-dir, or skipped by it).
std::vector<std::string> human_notes(const Plan& plan, const Outcome& outcome,
                                     const std::optional<PythonException>& exception);

// The whole result, for --json; `exit_code` is pysandbox's own (exit_codes::for_outcome).
// Takes the outcome by value: the captured output (up to the output limit, three times) moves
// into the JSON instead of being copied.
nlohmann::ordered_json result_json(const Plan& plan, Outcome outcome, int exit_code,
                                   std::string_view script_file = {});

// The result when pysandbox failed before a sandbox existed (usage, profile, host set-up).
nlohmann::ordered_json early_error_json(std::string_view message, std::string_view profile);

}  // namespace pysandbox
