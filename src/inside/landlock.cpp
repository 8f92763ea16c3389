#include "inside/landlock.hpp"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "sys/unique_fd.hpp"

namespace pysandbox::landlock {
namespace {

// Newer than the kernel headers Debian 12 builds with.
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif

constexpr std::uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                      LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE;

}  // namespace

int step_restrict_filesystem(ChildContext& ctx) noexcept {
    const Ruleset& ruleset = ctx.plan.landlock;
    if (ruleset.abi <= 0) return 0;  // optional layer; the result reports it as degraded
    landlock_ruleset_attr attr{};
    attr.handled_access_fs = ruleset.handled;
    sys::UniqueFd ruleset_fd(
        static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0)));
    if (!ruleset_fd)
        return step_fail(ctx, "landlock_create_ruleset(0x%llx)",
                         static_cast<unsigned long long>(ruleset.handled));
    for (const Rule& rule : ruleset.rules) {
        sys::UniqueFd parent(::open(rule.path.c_str(), O_PATH | O_CLOEXEC));
        if (!parent) {
            if (errno == ENOENT) continue;
            return step_fail(ctx, "open(%s, O_PATH)", rule.path.c_str());
        }
        landlock_path_beneath_attr beneath{};
        beneath.allowed_access = rule.access;
        beneath.parent_fd = parent.get();
        struct stat st {};
        if (::fstat(parent.get(), &st) == 0 && !S_ISDIR(st.st_mode))
            beneath.allowed_access &= kFileRights;  // directory rights on a file are EINVAL
        if (::syscall(SYS_landlock_add_rule, ruleset_fd.get(), LANDLOCK_RULE_PATH_BENEATH, &beneath,
                      0) != 0)
            return step_fail(ctx, "landlock_add_rule(%s)", rule.path.c_str());
    }
    if (::syscall(SYS_landlock_restrict_self, ruleset_fd.get(), 0) != 0)
        return step_fail(ctx, "landlock_restrict_self()");
    return 0;
}

}  // namespace pysandbox::landlock
