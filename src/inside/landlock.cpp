#include "inside/landlock.hpp"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

#include "sys/unique_fd.hpp"

namespace pysandbox::landlock {
namespace {

constexpr std::uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                      LANDLOCK_ACCESS_FS_READ_FILE | kAccessFsTruncate |
                                      kAccessFsIoctlDev;

// struct landlock_ruleset_attr as ABI 6 has it, and struct landlock_net_port_attr (ABI 4): newer
// than the kernel headers Debian 12 builds with.
struct RulesetAttr {
    std::uint64_t handled_access_fs;
    std::uint64_t handled_access_net;
    std::uint64_t scoped;
};
struct NetPortAttr {
    std::uint64_t allowed_access;
    std::uint64_t port;
};

// The size of the attribute the kernel of `abi` knows: an older kernel refuses a longer one
// unless its tail is zero, and the tail says nothing it could read.
std::size_t attr_size(int abi) {
    if (abi >= 6) return sizeof(RulesetAttr);
    if (abi >= 4) return offsetof(RulesetAttr, scoped);
    return offsetof(RulesetAttr, handled_access_net);
}

int add_path_rules(ChildContext& ctx, int ruleset_fd) noexcept {
    for (const Rule& rule : ctx.plan.landlock.rules) {
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
        if (::syscall(SYS_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) !=
            0)
            return step_fail(ctx, "landlock_add_rule(%s)", rule.path.c_str());
    }
    return 0;
}

int add_port_rules(ChildContext& ctx, int ruleset_fd) noexcept {
    for (std::uint16_t port : ctx.plan.landlock.connect_ports) {
        NetPortAttr rule{kAccessNetConnectTcp, port};
        if (::syscall(SYS_landlock_add_rule, ruleset_fd, kRuleNetPort, &rule, 0) != 0)
            return step_fail(ctx, "landlock_add_rule(connect TCP port %u)", unsigned{port});
    }
    return 0;
}

}  // namespace

int step_restrict_access(ChildContext& ctx) noexcept {
    const Ruleset& ruleset = ctx.plan.landlock;
    if (ruleset.abi <= 0) return 0;  // optional layer; the result reports it as degraded
    RulesetAttr attr{ruleset.handled, ruleset.handled_net, ruleset.scoped};
    sys::UniqueFd ruleset_fd(
        static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, attr_size(ruleset.abi), 0)));
    if (!ruleset_fd)
        return step_fail(ctx, "landlock_create_ruleset(fs 0x%llx, net 0x%llx, scoped 0x%llx)",
                         static_cast<unsigned long long>(ruleset.handled),
                         static_cast<unsigned long long>(ruleset.handled_net),
                         static_cast<unsigned long long>(ruleset.scoped));
    if (int rc = add_path_rules(ctx, ruleset_fd.get()); rc != 0) return rc;
    if (int rc = add_port_rules(ctx, ruleset_fd.get()); rc != 0) return rc;
    if (::syscall(SYS_landlock_restrict_self, ruleset_fd.get(), 0) != 0)
        return step_fail(ctx, "landlock_restrict_self()");
    return 0;
}

}  // namespace pysandbox::landlock
