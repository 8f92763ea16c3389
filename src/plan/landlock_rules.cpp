#include "plan/landlock_rules.hpp"

#include <linux/landlock.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "wire/sandbox_paths.hpp"

namespace pysandbox::landlock {
namespace {

constexpr std::uint64_t kRead = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
constexpr std::uint64_t kExecute = LANDLOCK_ACCESS_FS_EXECUTE;
constexpr std::uint64_t kWriteV1 = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                                   LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
                                   LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                                   LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
                                   LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;

std::uint64_t handled_for(int abi) {
    std::uint64_t handled = kRead | kExecute | kWriteV1;
    if (abi >= 2) handled |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3) handled |= kAccessFsTruncate;
    if (abi >= 5) handled |= kAccessFsIoctlDev;
    return handled;
}

// No bind at all (the proxy's port is bound before Landlock, by the setup); connections only to
// the proxy under proxy, none under none; loopback's TCP is left to its network namespace.
void add_network(int abi, NetMode net, Ruleset& ruleset) {
    if (abi < 4 || net == NetMode::loopback) return;
    ruleset.handled_net = kAccessNetBindTcp | kAccessNetConnectTcp;
    if (net == NetMode::proxy) ruleset.connect_ports.push_back(proxy::kListenPort);
}

}  // namespace

int kernel_abi() noexcept {
    long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi < 0 ? 0 : static_cast<int>(abi);
}

Ruleset plan_rules(int abi, NetMode net, const std::vector<std::string>& read_only,
                   const std::vector<std::string>& writable) {
    Ruleset ruleset;
    ruleset.abi = abi;
    if (abi <= 0) return ruleset;
    ruleset.handled = handled_for(abi);
    add_network(abi, net, ruleset);
    if (abi >= 6) ruleset.scoped = kScopeAbstractUnixSocket | kScopeSignal;
    // Directory listings of the root reveal only what the sandbox itself put there.
    ruleset.rules.push_back({"/", LANDLOCK_ACCESS_FS_READ_DIR});
    for (const auto& path : read_only) ruleset.rules.push_back({path, kRead | kExecute});
    ruleset.rules.push_back({"/proc", kRead});
    // /dev holds only null, zero, full, random and urandom: writing to them is harmless. No rule
    // grants device ioctls: none of those needs one, and descriptors opened before Landlock (the
    // standard streams, a session's terminal) keep theirs.
    ruleset.rules.push_back(
        {"/dev", kRead | LANDLOCK_ACCESS_FS_WRITE_FILE | (ruleset.handled & kAccessFsTruncate)});
    for (const auto& path : writable)
        ruleset.rules.push_back({path, ruleset.handled & ~(kExecute | kAccessFsIoctlDev)});
    return ruleset;
}

std::vector<std::string> handled_rights(const Ruleset& ruleset) {
    std::vector<std::string> names;
    if (ruleset.abi <= 0) return names;
    names.emplace_back("fs");
    if ((ruleset.handled & kAccessFsIoctlDev) != 0) names.emplace_back("ioctl_dev");
    if (ruleset.handled_net != 0) names.emplace_back("tcp");
    if (ruleset.scoped != 0) names.emplace_back("scopes");
    return names;
}

}  // namespace pysandbox::landlock
