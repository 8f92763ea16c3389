#pragma once
// Resource limits applied inside: the rlimit path (cgroup v2 is set up by the supervisor).

#include "inside/child.hpp"

namespace pysandbox::limits {

// Which of the plan's rlimits set_rlimits sets: the open-files limit goes last, on its own. The
// kernel refuses to pass a descriptor (SCM_RIGHTS) once the sender's user has more in flight
// than the sender's RLIMIT_NOFILE, and every sandbox of one host user counts as that user: with
// the script's small limit already in place, another sandbox's script that keeps descriptors in
// flight would make this one fail to hand its seccomp listener to the supervisor.
enum class Which { all_but_open_files, open_files };

// Sets those of the plan's rlimits on the calling process (the script's, between fork and
// execve); returns the one the kernel refused (errno says why), or nullptr.
const Rlimit* set_rlimits(const Plan& plan, Which which) noexcept;
int step_set_affinity(ChildContext& ctx) noexcept;
// Writes the plan's user_counts into the sandbox's user namespace (/proc/sys/user): each bounds
// what the sandbox can take from a count the kernel keeps for the host user across namespaces.
int step_bound_user_counts(ChildContext& ctx) noexcept;

}  // namespace pysandbox::limits
