#include "limits.hpp"

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

}  // namespace pysandbox::limits
