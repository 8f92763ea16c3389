#include "inside/limits.hpp"

#include <sched.h>
#include <sys/resource.h>

namespace pysandbox::limits {

const Rlimit* set_rlimits(const Plan& plan, Which which) noexcept {
    for (const Rlimit& limit : plan.rlimits) {
        if ((limit.resource == RLIMIT_NOFILE) != (which == Which::open_files)) continue;
        rlimit value{limit.soft, limit.hard};
        if (::setrlimit(limit.resource, &value) != 0) return &limit;
    }
    return nullptr;
}

// As many CPUs as the plan picked, beginning with the one the child runs on, then the next
// allowed ones: pinning it elsewhere would make it wait for that CPU (and every sandbox would
// crowd onto the first ones).
int step_set_affinity(ChildContext& ctx) noexcept {
    const cpu_set_t& allowed = ctx.plan.allowed_cpus;
    const int wanted = CPU_COUNT(&ctx.plan.affinity);
    const int here = ::sched_getcpu();
    const int first = here >= 0 && here < CPU_SETSIZE && CPU_ISSET(here, &allowed) ? here : 0;
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    for (int i = 0, picked = 0; i < CPU_SETSIZE && picked < wanted; ++i) {
        const int cpu = (first + i) % CPU_SETSIZE;
        if (CPU_ISSET(cpu, &allowed)) {
            CPU_SET(cpu, &cpus);
            ++picked;
        }
    }
    if (::sched_setaffinity(0, sizeof cpus, &cpus) != 0)
        return step_fail(ctx, "sched_setaffinity(%d CPUs)", wanted);
    return 0;
}

}  // namespace pysandbox::limits
