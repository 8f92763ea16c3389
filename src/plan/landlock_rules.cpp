#include "plan/landlock_rules.hpp"

#include <linux/landlock.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace pysandbox::landlock {
namespace {

// Newer than the kernel headers Debian 12 builds with.
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif

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
    if (abi >= 3) handled |= LANDLOCK_ACCESS_FS_TRUNCATE;
    return handled;
}

}  // namespace

int kernel_abi() noexcept {
    long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi < 0 ? 0 : static_cast<int>(abi);
}

Ruleset plan_rules(int abi, const std::vector<std::string>& read_only,
                   const std::vector<std::string>& writable) {
    Ruleset ruleset;
    ruleset.abi = abi;
    if (abi <= 0) return ruleset;
    ruleset.handled = handled_for(abi);
    // Directory listings of the root reveal only what the sandbox itself put there.
    ruleset.rules.push_back({"/", LANDLOCK_ACCESS_FS_READ_DIR});
    for (const auto& path : read_only) ruleset.rules.push_back({path, kRead | kExecute});
    ruleset.rules.push_back({"/proc", kRead});
    // /dev holds only null, zero, full, random and urandom: writing to them is harmless.
    ruleset.rules.push_back({"/dev", kRead | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                         (ruleset.handled & LANDLOCK_ACCESS_FS_TRUNCATE)});
    for (const auto& path : writable) ruleset.rules.push_back({path, ruleset.handled & ~kExecute});
    return ruleset;
}

}  // namespace pysandbox::landlock
