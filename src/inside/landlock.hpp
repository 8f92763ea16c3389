#pragma once
// Landlock's step: the child applies the plan's ruleset (plan/landlock_rules.hpp) to itself: its
// filesystem rules, its TCP ports and its scopes.

#include "inside/child.hpp"

namespace pysandbox::landlock {

int step_restrict_access(ChildContext& ctx) noexcept;

}  // namespace pysandbox::landlock
