#pragma once
// After the run, once nothing of the sandbox is left: what it left behind. The artifacts under
// /tmp/work (listed, hashed, copied out with --output-dir), the proxy's denied destinations (the
// proxy stops here), and the cgroup's out-of-memory count (the cgroup goes away here).

#include "outcome.hpp"
#include "plan.hpp"
#include "supervisor.hpp"

namespace pysandbox {

// Completes `supervised.outcome` and releases the resources the supervisor handed over.
Outcome collect(const Plan& plan, Supervised supervised);

}  // namespace pysandbox
