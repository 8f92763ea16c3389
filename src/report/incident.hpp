#pragma once
// The incident log: one JSON line (schema pysandbox.incident/v1) for each run or check in which
// something was blocked, appended to a host file for later analysis. The man page documents
// the fields; result.cpp and check.cpp say what was blocked.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "plan/plan.hpp"
#include "report/outcome.hpp"

namespace pysandbox::incident {

inline constexpr std::string_view kSchema = "pysandbox.incident/v1";

// The fields every entry starts with: schema, time (UTC, RFC 3339, milliseconds), command
// ("run", "check" or "session"), profile, script (as given) and script_sha256.
nlohmann::ordered_json head(const Plan& plan, std::string_view command);

// The entry of a run with what it had blocked (violations.hpp); null when nothing was.
// Resource limits are not incidents.
nlohmann::ordered_json run_entry(const Plan& plan, const Outcome& outcome);

// The same for a cell (of a session, an MCP call, a batch job), named `script` ("<cell-N>", or
// the file name it was given) and made of `code`: command "session", script_sha256 the code's.
nlohmann::ordered_json cell_entry(const Plan& plan, const Outcome& outcome, std::string_view script,
                                  std::string_view code);

// Appends `entry` to the plan's log as one line, with one write(2): O_APPEND keeps the lines of
// concurrent runs whole. Returns why it failed, or an empty string. Without a log: nothing.
std::string append(const Plan& plan, const nlohmann::ordered_json& entry);

}  // namespace pysandbox::incident
