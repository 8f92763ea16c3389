#pragma once
// After the run, or after a session's cell: what the sandbox left behind. The artifacts under
// /tmp/work (listed, hashed, copied out with --output-dir), the proxy's denied destinations, and
// the cgroup's out-of-memory count, gathered by one function (gather) for a run and a cell alike;
// for a run, also the end of the proxy and of the cgroup, and --workdir's changes copied back.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "engine/artifacts.hpp"
#include "engine/sandbox.hpp"
#include "plan/plan.hpp"
#include "proxy/proxy.hpp"
#include "report/outcome.hpp"
#include "sys/cgroup.hpp"

namespace pysandbox {

// Completes `supervised.outcome` and releases the resources the supervisor handed over.
Outcome collect(const Plan& plan, Supervised supervised);

// What collection may add to a run's (or a session cell's) wall time: hashing and copying stop
// this long after the script's time ended (man page), however late collection began. The rest
// of the documented second is pysandbox's own start, teardown and result on a busy host.
inline constexpr std::chrono::milliseconds kCollectBudget{500};

// Where artifacts are copied: an open host directory and its path, or nowhere; or
// (artifacts::kHostDirLater) a directory `make` makes when the walk first needs it.
struct ArtifactTarget {
    int dir = artifacts::kListOnly;
    std::string path;
    std::function<int()> make;
};

// What a sandbox left for collection, ended (Supervised) or still running (a session's, between
// cells): its /tmp/work (-1 when it never sent one), its proxy and its cgroup (null when none).
struct LeftBehind {
    int work_dir = -1;
    proxy::Proxy* proxy = nullptr;
    cgroup::RunCgroup* cgroup = nullptr;
};

// How it is gathered: where the artifacts go; the listing to leave out (a session passes the
// previous cell's snapshot, so that only what a cell changed is listed); whether the proxy stops
// (the run is over) or only its count is taken (the sandbox lives on); the OOM kills already
// reported (a session's earlier cells).
struct Gathering {
    ArtifactTarget target;
    const artifacts::Snapshot* unchanged = nullptr;
    bool stop_proxy = true;
    std::uint64_t oom_before = 0;
    // When hashing and copying stop; by default kCollectBudget from now.
    std::optional<std::chrono::steady_clock::time_point> deadline;
};

// Into `outcome`: the artifacts under `left.work_dir`, hashed and, with a target, copied, within
// kCollectBudget; the proxy's denied destinations; the cgroup's OOM kills since `oom_before`.
// Returns what the artifact walk saw (nothing without a work dir).
artifacts::Snapshot gather(const Plan& plan, const LeftBehind& left, const Gathering& how,
                           Outcome& outcome);

}  // namespace pysandbox
