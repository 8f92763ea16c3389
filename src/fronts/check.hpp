#pragma once
// `pysandbox check`: the script's denied imports and calls, found by an analyzer (policy.cpp) that
// runs with Python's own ast inside the sandbox, under the profile's isolation and limits: parsing
// untrusted code is itself untrusted work.

#include <string>
#include <string_view>
#include <vector>

#include "fronts/cli.hpp"

namespace pysandbox::check {

inline constexpr std::string_view kSchema = "pysandbox.check/v1";

// Runs the analysis and prints the findings. Returns 0 clean, 1 findings, 125 when the analysis
// itself failed. Throws (ProfileError, UsageError, SysError) before the sandbox runs.
int run(const CheckInvocation& options, const std::vector<std::string>& host_env);

// The --json object for an error pysandbox hit before any analysis.
std::string error_json(std::string_view message);

}  // namespace pysandbox::check
