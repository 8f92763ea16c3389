#include "inside/limits.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "inside/mounts.hpp"

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

// A count absent from this kernel (an older one) is skipped: there is nothing of it to take.
int step_bound_user_counts(ChildContext& ctx) noexcept {
    for (const UserCount& count : ctx.plan.user_counts) {
        char path[PATH_MAX];
        std::snprintf(path, sizeof path, "%s/proc/sys/user/%s", mounts::staging_root(ctx),
                      count.name.c_str());
        const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) continue;
        if (fd < 0) return step_fail(ctx, "open(%s)", path);
        char text[24];
        const int length =
            std::snprintf(text, sizeof text, "%llu\n", static_cast<unsigned long long>(count.max));
        const bool written = ::write(fd, text, static_cast<std::size_t>(length)) == length;
        const int error = errno;
        ::close(fd);
        if (!written) {
            errno = error;
            return step_fail(ctx, "write(%s, %llu)", path,
                             static_cast<unsigned long long>(count.max));
        }
    }
    return 0;
}

}  // namespace pysandbox::limits
