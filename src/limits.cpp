#include "limits.hpp"

#include <sched.h>
#include <sys/resource.h>

namespace pysandbox::limits {

int step_set_rlimits(ChildContext& ctx) noexcept {
    for (const Rlimit& limit : ctx.plan.rlimits) {
        rlimit value{limit.soft, limit.hard};
        if (::setrlimit(limit.resource, &value) != 0)
            return step_fail(ctx, "setrlimit(%d, %llu, %llu)", limit.resource,
                             static_cast<unsigned long long>(limit.soft),
                             static_cast<unsigned long long>(limit.hard));
    }
    return 0;
}

int step_set_affinity(ChildContext& ctx) noexcept {
    const cpu_set_t& cpus = ctx.plan.affinity;
    if (::sched_setaffinity(0, sizeof cpus, &cpus) != 0)
        return step_fail(ctx, "sched_setaffinity(%d CPUs)", CPU_COUNT(&cpus));
    return 0;
}

}  // namespace pysandbox::limits
