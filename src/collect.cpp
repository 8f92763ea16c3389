#include "collect.hpp"

#include <fcntl.h>

#include "artifacts.hpp"

namespace pysandbox {
namespace {

// Runs when nothing of the sandbox is left, so nothing inside changes the tree meanwhile.
std::vector<artifacts::Artifact> list_artifacts(const Plan& plan, int work_dir,
                                                std::int64_t start_realtime_ns) {
    artifacts::Options options;
    for (const auto& input : plan.inputs) options.inputs.push_back(input.name);
    options.max_file_size = plan.profile.limits.artifact_size;
    options.max_total_size = plan.profile.limits.artifacts_total;
    // A --workdir holds earlier runs' files too: only what this run wrote is an artifact.
    if (plan.host_workdir) options.modified_after_ns = start_realtime_ns;
    sys::UniqueFd host_dir;
    if (plan.output_dir) {
        options.output_dir_path = *plan.output_dir;
        host_dir.reset(::open(plan.output_dir->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        options.output_dir = host_dir ? host_dir.get() : artifacts::kHostDirMissing;
    }
    return artifacts::collect(work_dir, options);
}

}  // namespace

Outcome collect(const Plan& plan, Supervised supervised) {
    Outcome& outcome = supervised.outcome;
    if (supervised.work_dir)
        outcome.files =
            list_artifacts(plan, supervised.work_dir.get(), supervised.start_realtime_ns);
    if (supervised.proxy) outcome.blocked_connections = supervised.proxy->stop();
    if (supervised.cgroup) outcome.oom_kills = supervised.cgroup->oom_kills();
    return std::move(outcome);
}

}  // namespace pysandbox
