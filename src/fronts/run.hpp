#pragma once
// `pysandbox run`: one script in one sandbox, its output passed through (or captured with --json),
// the result told as one line on stderr or one JSON object, the exit code the script's.

#include <string>
#include <vector>

#include "fronts/cli.hpp"

namespace pysandbox {

// Returns the exit code (pysandbox(1), EXIT STATUS). Throws what make_plan and execute throw.
int run(const RunInvocation& invocation, const std::vector<std::string>& host_env);

}  // namespace pysandbox
