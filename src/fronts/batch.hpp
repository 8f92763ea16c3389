#pragma once
// `pysandbox batch`: many jobs on one machine, N at a time, each in a warm sandbox of its own
// (pool.hpp) used once; one result line per job on stdout.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/session.hpp"
#include "fronts/cli.hpp"
#include "fronts/requests.hpp"
#include "plan/profile.hpp"

namespace pysandbox {

// Runs the jobs to their end: 0 when every job ran (whatever its status; 1 with
// --fail-on-error when a job's status is not ok), 125 when a sandbox could not be set up for
// one, 128 + a signal that stopped the batch. Throws what make_plan
// throws (a profile that does not load) and std::system_error for a jobs file that cannot be
// opened, before running anything.
int run_batch(const BatchInvocation& invocation, const std::vector<std::string>& host_env);

}  // namespace pysandbox
