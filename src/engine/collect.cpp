#include "engine/collect.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/workdir.hpp"

namespace pysandbox {
namespace {

using Clock = std::chrono::steady_clock;

// --output-runs: a new run-N in the directory the plan held open, or in the one made now (when
// it was not there; another run may have made it first).
ArtifactTarget open_run_dir(const Plan& plan, sys::UniqueFd& made, Outcome& outcome) {
    const std::string& dir = *plan.output_dir;
    sys::UniqueFd runs;
    if (!plan.output_dir_fd && (::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST))
        runs.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    const int parent = plan.output_dir_fd ? plan.output_dir_fd.get() : runs.get();
    std::string name;
    if (parent >= 0) made = artifacts::make_run_dir(parent, name);
    if (made) return {made.get(), dir + "/" + name, {}};
    outcome.warnings.push_back("--output-runs: cannot create a run directory in " + dir + ": " +
                               std::strerror(errno) + "; no artifact was copied");
    return {artifacts::kHostDirMissing, dir, {}};
}

// The output directory as the walk writes into it: the one the plan held open, or the one made
// now; kHostDirMissing (every artifact skipped "error") when that fails.
ArtifactTarget open_output_dir(const Plan& plan, sys::UniqueFd& made, Outcome& outcome) {
    if (!plan.output_dir) return {};
    if (plan.output_runs) return open_run_dir(plan, made, outcome);
    const std::string& dir = *plan.output_dir;
    if (plan.output_dir_fd) return {plan.output_dir_fd.get(), dir, {}};
    made = artifacts::make_host_dir(AT_FDCWD, dir);
    if (made) return {made.get(), dir, {}};
    outcome.warnings.push_back("--output-dir: cannot create " + dir + ": " + std::strerror(errno) +
                               "; no artifact was copied");
    return {artifacts::kHostDirMissing, dir, {}};
}

// The script's changes to --workdir, applied to the host directory: all of them, whatever the
// time (they are the caller's data, and no more than tmp_size of it). Root's copies belong to the
// uid the script ran as, unless the workdir stays the caller's.
void copy_back_workdir(const Plan& plan, int upper, Outcome& outcome) {
    workdir::Options options;
    if (plan.ids.privileged && !plan.host_workdir->stays_callers) {
        options.owner = plan.ids.outer_uid;
        options.group = plan.ids.outer_gid;
    }
    for (std::string& problem : workdir::apply(upper, plan.host_workdir->fd.get(), options))
        outcome.warnings.push_back(std::move(problem));
}

artifacts::Snapshot list_artifacts(const Plan& plan, int work_dir, const Gathering& how,
                                   Outcome& outcome) {
    artifacts::Options options;
    for (const auto& input : plan.inputs) options.inputs.push_back(input.name);
    options.max_file_size = plan.profile.limits.artifact_size;
    options.max_total_size = plan.profile.limits.artifacts_total;
    options.deadline = how.deadline.value_or(Clock::now() + kCollectBudget);
    options.unchanged = how.unchanged;
    options.output_dir = how.target.dir;
    options.output_dir_path = how.target.path;
    options.make_output_dir = how.target.make;
    // Root's copies belong to the uid the script ran as, like the files it wrote.
    if (plan.ids.privileged &&
        (how.target.dir >= 0 || how.target.dir == artifacts::kHostDirLater)) {
        options.owner = plan.ids.outer_uid;
        options.group = plan.ids.outer_gid;
    }
    artifacts::Listing listing = artifacts::collect(work_dir, options);
    outcome.files = std::move(listing.files);
    outcome.files_omitted = listing.omitted;
    return std::move(listing.seen);
}

}  // namespace

artifacts::Snapshot gather(const Plan& plan, const LeftBehind& left, const Gathering& how,
                           Outcome& outcome) {
    artifacts::Snapshot seen;
    if (left.work_dir >= 0) seen = list_artifacts(plan, left.work_dir, how, outcome);
    if (left.proxy)
        outcome.blocked_connections =
            how.stop_proxy ? left.proxy->stop() : left.proxy->take_blocked();
    if (left.cgroup) outcome.oom_kills = left.cgroup->oom_kills() - how.oom_before;
    return seen;
}

Outcome collect(const Plan& plan, Supervised supervised) {
    const Clock::time_point start = Clock::now();
    Outcome& outcome = supervised.outcome;
    const int work_dir = supervised.work_dir.get();
    if (work_dir >= 0 && plan.host_workdir) copy_back_workdir(plan, work_dir, outcome);
    // Runs when nothing of the sandbox is left, so nothing inside changes the tree meanwhile.
    sys::UniqueFd made;
    Gathering how;
    how.deadline = std::min(start, supervised.ended.value_or(start)) + kCollectBudget;
    if (work_dir >= 0) how.target = open_output_dir(plan, made, outcome);
    gather(plan, {work_dir, supervised.proxy.get(), supervised.cgroup.get()}, how, outcome);
    outcome.collect = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    return std::move(outcome);
}

}  // namespace pysandbox
