#pragma once
// One run, start to end: supervise the plan's sandbox, then collect what it left. Every front door
// (run, check, and the session, server and batch fronts) runs a Plan through this.

#include "plan/plan.hpp"
#include "report/outcome.hpp"

namespace pysandbox {

// Throws UserNamespaceError or SysError when the sandbox cannot be created; every other end of
// the run is an Outcome.
Outcome execute(const Plan& plan);

}  // namespace pysandbox
