#pragma once
// `run`'s supervision: one sandbox (sandbox.hpp) watched to its end under the run's deadline, with
// the signals pysandbox gets passed on to the script. What the run left behind is collect.hpp's
// business.

#include "engine/sandbox.hpp"
#include "plan/plan.hpp"

namespace pysandbox {

// Runs the plan's sandbox to its end. Throws UserNamespaceError or SysError when the sandbox
// cannot even be created (clone3, id maps); everything after that is in the Outcome.
Supervised watch_run(const Plan& plan);

}  // namespace pysandbox
