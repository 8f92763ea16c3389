#pragma once
// The sandbox's filesystem: a tmpfs root holding read-only binds of the profile's host paths, a
// minimal /dev, synthetic /etc files, a size-capped writable /tmp, and a fresh /proc.

#include "inside/child.hpp"

namespace pysandbox::mounts {

// Where the sandbox's root is while it is built: the staging root for a cloned sandbox, the
// zygote's (the job's own) root for a forked one.
const char* staging_root(const ChildContext& ctx) noexcept;

int step_make_mounts_private(ChildContext& ctx) noexcept;
int step_open_font_list(ChildContext& ctx) noexcept;
int step_open_workdir(ChildContext& ctx) noexcept;
int step_mount_staging_root(ChildContext& ctx) noexcept;
int step_bind_host_paths(ChildContext& ctx) noexcept;
int step_write_files(ChildContext& ctx) noexcept;
// --with-env: the environment's site/ (plan.packages_dir), opened as the workdir is, before the
// staging root hides the host's /tmp, then bound read-only (execution allowed: C extensions
// load) at kPackagesDir through that descriptor, so the path cannot be swapped in between.
int step_open_packages(ChildContext& ctx) noexcept;
int step_bind_packages(ChildContext& ctx) noexcept;
int step_populate_dev(ChildContext& ctx) noexcept;
int step_mount_gvisor_state(ChildContext& ctx) noexcept;
// Under gVisor, with a [policy] or a cell driver: binds each channel's socket (the supervisor's,
// passed as the channel's end) at kGvisorPolicySocket or kGvisorControlSocket, listens on it,
// and closes this copy, so that the supervisor's is the only one and nothing runsc starts holds
// it (engine/policy_channel.hpp, engine/control_channel.hpp).
int step_listen_channels(ChildContext& ctx) noexcept;
int step_mount_shm(ChildContext& ctx) noexcept;
int step_mount_tmp(ChildContext& ctx) noexcept;
int step_copy_font_list(ChildContext& ctx) noexcept;
int step_copy_inputs(ChildContext& ctx) noexcept;
int step_mount_workdir_overlay(ChildContext& ctx) noexcept;
int step_send_work_dir(ChildContext& ctx) noexcept;
int step_mount_proc(ChildContext& ctx) noexcept;
int step_mask_proc(ChildContext& ctx) noexcept;
int step_pivot_root(ChildContext& ctx) noexcept;
int step_seal_root(ChildContext& ctx) noexcept;
int step_enter_workdir(ChildContext& ctx) noexcept;

}  // namespace pysandbox::mounts
