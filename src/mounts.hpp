#pragma once
// The sandbox's filesystem: a tmpfs root holding read-only binds of the profile's host paths, a
// minimal /dev, synthetic /etc files, a size-capped writable /tmp, and a fresh /proc.

#include "child.hpp"

namespace pysandbox::mounts {

// Where the new root is assembled before pivot_root. Every bind source is an absolute host path
// outside /tmp (plan.cpp rejects /tmp), so covering the host's /tmp hides nothing that is needed.
inline constexpr const char* kStagingRoot = "/tmp";
// Beneath the staging root, while the root is built: the tmpfs of --workdir's upper layer and the
// inputs' tmpfs. Both are detached from the tree before pivot_root; the overlay and the binds
// keep them alive.
inline constexpr const char* kWorkdirLayers = ".workdir";
inline constexpr const char* kInputsDir = ".inputs";

int step_make_mounts_private(ChildContext& ctx) noexcept;
int step_open_font_list(ChildContext& ctx) noexcept;
int step_open_workdir(ChildContext& ctx) noexcept;
int step_mount_staging_root(ChildContext& ctx) noexcept;
int step_bind_host_paths(ChildContext& ctx) noexcept;
int step_write_files(ChildContext& ctx) noexcept;
int step_populate_dev(ChildContext& ctx) noexcept;
int step_mount_shm(ChildContext& ctx) noexcept;
int step_mount_tmp(ChildContext& ctx) noexcept;
int step_copy_font_list(ChildContext& ctx) noexcept;
int step_copy_inputs(ChildContext& ctx) noexcept;
int step_mount_workdir_overlay(ChildContext& ctx) noexcept;
int step_send_work_dir(ChildContext& ctx) noexcept;
int step_mount_proc(ChildContext& ctx) noexcept;
int step_pivot_root(ChildContext& ctx) noexcept;
int step_seal_root(ChildContext& ctx) noexcept;
int step_enter_workdir(ChildContext& ctx) noexcept;

}  // namespace pysandbox::mounts
