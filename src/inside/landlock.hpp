#pragma once
// Landlock's step: the child applies the plan's ruleset (plan/landlock_rules.hpp) to itself.

#include "inside/child.hpp"

namespace pysandbox::landlock {

int step_restrict_filesystem(ChildContext& ctx) noexcept;

}  // namespace pysandbox::landlock
