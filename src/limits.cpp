#include "limits.hpp"

#include <sched.h>
#include <sys/resource.h>

namespace pysandbox::limits {

const Rlimit* set_rlimits(const Plan& plan) noexcept {
    for (const Rlimit& limit : plan.rlimits) {
        rlimit value{limit.soft, limit.hard};
        if (::setrlimit(limit.resource, &value) != 0) return &limit;
    }
    return nullptr;
}

int step_set_affinity(ChildContext& ctx) noexcept {
    const cpu_set_t& cpus = ctx.plan.affinity;
    if (::sched_setaffinity(0, sizeof cpus, &cpus) != 0)
        return step_fail(ctx, "sched_setaffinity(%d CPUs)", CPU_COUNT(&cpus));
    return 0;
}

}  // namespace pysandbox::limits
