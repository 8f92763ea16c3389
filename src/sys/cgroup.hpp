#pragma once
// Memory, processes and CPU through a delegated cgroup v2, when the caller has one: the run gets
// its own child cgroup (the sandbox starts in it through clone3's CLONE_INTO_CGROUP), its limits
// are written there, `memory.events` tells an out-of-memory kill apart from any other SIGKILL, and
// the cgroup is removed after the run. Without one, the rlimits in the Plan do the job.
//
// The cgroupfs root is configurable ($PYSANDBOX_CGROUP_ROOT, default /sys/fs/cgroup) so this can
// be tested against a directory tree that imitates one.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "sys/unique_fd.hpp"

namespace pysandbox::cgroup {

// A cgroup v2 directory in which pysandbox may create a child with these controllers.
struct Delegation {
    std::filesystem::path dir;
    bool cpu = false;  // cpu.max can be written too
};

// Why no delegated cgroup can be used (for -v, doctor and the result's `degraded`).
using Unavailable = std::string;

std::filesystem::path cgroupfs_root();  // $PYSANDBOX_CGROUP_ROOT or /sys/fs/cgroup

// The caller's own cgroup under `root`, as named in `proc_self_cgroup` (the text of
// /proc/self/cgroup), when it is writable and memory and pids are enabled for its children.
std::variant<Delegation, Unavailable> find_delegation(const std::filesystem::path& root,
                                                      std::string_view proc_self_cgroup);

// find_delegation for this process: its /proc/self/cgroup under cgroupfs_root(). What a run and
// `pysandbox doctor` both decide with.
std::variant<Delegation, Unavailable> find_own_delegation();

// What the run's cgroup enforces.
struct Settings {
    std::uint64_t memory = 0;     // memory.max; memory.swap.max is 0
    std::uint64_t max_procs = 0;  // pids.max
    std::uint64_t cpus = 0;       // cpu.max: this many CPUs' worth of time (when delegated)
};

// Writes the limits into an existing cgroup directory. Returns 0 or -errno, naming the file.
int write_limits(int dir_fd, const Settings& settings, bool with_cpu, std::string& failed_file);

// `oom_kill` from memory.events: processes the kernel killed for memory.
std::uint64_t read_oom_kills(int dir_fd);

// The run's own cgroup. Created before clone, removed (after killing whatever is left) when
// destroyed.
class RunCgroup {
  public:
    // Throws SysError naming the file when the cgroup cannot be created or configured.
    RunCgroup(const Delegation& parent, const Settings& settings);
    ~RunCgroup();
    RunCgroup(const RunCgroup&) = delete;
    RunCgroup& operator=(const RunCgroup&) = delete;

    int fd() const { return dir_.get(); }  // for clone3's cgroup field
    std::uint64_t oom_kills() const { return read_oom_kills(dir_.get()); }

  private:
    std::filesystem::path path_;
    sys::UniqueFd dir_;
};

}  // namespace pysandbox::cgroup
