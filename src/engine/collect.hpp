#pragma once
// After the run, once nothing of the sandbox is left: what it left behind. The artifacts under
// /tmp/work (listed, hashed, copied out with --output-dir), the proxy's denied destinations (the
// proxy stops here), and the cgroup's out-of-memory count (the cgroup goes away here).

#include <chrono>
#include <string>

#include "engine/artifacts.hpp"
#include "engine/sandbox.hpp"
#include "plan/plan.hpp"
#include "report/outcome.hpp"

namespace pysandbox {

// Completes `supervised.outcome` and releases the resources the supervisor handed over.
Outcome collect(const Plan& plan, Supervised supervised);

// What collection may add to a run's (or a session cell's) wall time: hashing and copying stop
// here (man page).
inline constexpr std::chrono::seconds kCollectBudget{1};

// Where artifacts are copied: an open host directory and its path, or nowhere.
struct ArtifactTarget {
    int dir = artifacts::kListOnly;
    std::string path;
};

// Lists the artifacts under `work_dir` into `outcome`, hashed and, with a target, copied, within
// kCollectBudget. A session passes the previous listing's snapshot (`unchanged`) so that only what
// a cell changed is listed. Returns what the walk saw.
artifacts::Snapshot list_artifacts(const Plan& plan, int work_dir, const ArtifactTarget& target,
                                   const artifacts::Snapshot* unchanged, Outcome& outcome);

}  // namespace pysandbox
