#pragma once
// Resource limits applied inside (the rlimit path; cgroup v2 joins in a later change).

#include "child.hpp"

namespace pysandbox::limits {

int step_set_rlimits(ChildContext& ctx) noexcept;
int step_set_affinity(ChildContext& ctx) noexcept;

}  // namespace pysandbox::limits
