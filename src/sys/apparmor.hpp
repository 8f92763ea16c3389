#pragma once
// AppArmor's restriction of unprivileged user namespaces (Ubuntu 23.10 and later): with
// kernel.apparmor_restrict_unprivileged_userns = 1, a process whose AppArmor profile does not grant
// `userns` gets a user namespace without capabilities, so clone succeeds and the first mount in
// it fails with EPERM. Root (CAP_SYS_ADMIN on the host) is not restricted.

#include <string_view>

namespace pysandbox::apparmor {

inline constexpr std::string_view kRestrictSysctl =
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns";

// The sysctl reads 1 (the file a test build injects instead, sys/fault_injection.hpp).
bool restricts_userns();

// It restricts this process: the sysctl is set and the caller is not root.
bool restricts_caller();

}  // namespace pysandbox::apparmor
