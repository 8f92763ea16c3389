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
#include "fronts/cell_request.hpp"
#include "fronts/cli.hpp"
#include "plan/profile.hpp"

namespace pysandbox {

// One line of a jobs file, read: the cell it runs and the profile (an index into those offered).
struct Job {
    Cell cell;
    std::size_t profile = 0;
};

// {"id", "code" | "script", "args", "stdin", "timeout", "profile", "inputs"}. A script and the
// inputs are host files, read now as the caller. `limits_of(i)`: the limits of offered profile i.
std::variant<Job, BadRequest> parse_job(std::string_view line,
                                        std::span<const std::string> profiles,
                                        std::span<const Limits* const> limits);

// Runs the jobs to their end: 0 when every job ran (whatever its status), 125 when a sandbox
// could not be set up for one, 128 + a signal that stopped the batch. Throws what make_plan
// throws (a profile that does not load) and std::system_error for a jobs file that cannot be
// opened, before running anything.
int run_batch(const BatchInvocation& invocation, const std::vector<std::string>& host_env);

}  // namespace pysandbox
