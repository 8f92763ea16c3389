#pragma once
// Resource limits applied inside: the rlimit path (cgroup v2 is set up by the supervisor).

#include "child.hpp"

namespace pysandbox::limits {

// Sets the plan's rlimits on the calling process (the script's, between fork and execve);
// returns the one the kernel refused (errno says why), or nullptr.
const Rlimit* set_rlimits(const Plan& plan) noexcept;
int step_set_affinity(ChildContext& ctx) noexcept;

}  // namespace pysandbox::limits
