#pragma once
// Profile + Request -> Plan: everything the child will do, decided before clone(). Every path is
// resolved, every limit is a number, every string the child needs is built. The child reads the
// Plan and never parses or decides anything. The plan knows no front door: the command line, a
// session or a server fills the same Request (request.hpp).

#include <sched.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <linux/filter.h>

#include "plan/landlock_rules.hpp"
#include "plan/profile.hpp"
#include "plan/request.hpp"
#include "plan/seccomp.hpp"
#include "sys/cgroup.hpp"
#include "sys/unique_fd.hpp"
#include "wire/sandbox_paths.hpp"

namespace pysandbox {

// A host path bound read-only at the same place inside.
struct BindMount {
    std::string source;  // absolute host path (directory or file)
    bool is_directory = true;
};

// A symlink recreated inside (merged-/usr systems have /bin -> usr/bin).
struct Symlink {
    std::string path;    // absolute inside
    std::string target;  // link text, as on the host
};

// The child keeps one descriptor per input while it builds the root: a fixed array, no allocation.
inline constexpr std::size_t kMaxInputs = 64;

// A host file that appears read-only at /tmp/work/NAME (--input). Opened by pysandbox as the
// caller when the plan is made; the child copies it into a tmpfs of the sandbox's own, so that no
// host path of it is visible inside (a bind would show it in /proc/self/mountinfo).
struct InputFile {
    std::string source;  // absolute host path of a regular file (for messages)
    std::string name;    // one path component
    sys::UniqueFd fd;    // read-only, close-on-exec
};

// --workdir: the host directory is the lower layer of an overlay at /tmp/work whose upper layer
// is a tmpfs of the sandbox's (bounded like /tmp). The script's changes reach the host only after
// the run, copied back by pysandbox as plain data (workdir.hpp). The child opens the directory in
// its own mount namespace (overlayfs takes no layer from another), checks it is the one the plan
// opened, and names it by its /proc/self/fd path, so no host path appears in the mount table.
struct HostWorkdir {
    std::string path;            // absolute
    sys::UniqueFd fd;            // O_PATH | O_DIRECTORY, opened as the caller: where the changes go
    std::string tmpfs_options;   // the upper layer's tmpfs
    std::string overlay_layers;  // ",upperdir=...,workdir=...,userxattr", after the lowerdir
    bool stays_callers = false;  // Overrides::workdir_stays_callers: the copies are the caller's
};

// A small file written into the read-only root (synthetic /etc files, the script).
struct GeneratedFile {
    std::string path;  // absolute inside
    std::string content;
    mode_t mode = 0444;
};

// matplotlib's font list, prepared when pysandbox was built (tools/prepare_fontlist.py). Every
// run's /tmp is new, so without it matplotlib scans all fonts again on each import. The child
// copies it into MPLCONFIGDIR: a copy, not a link, because matplotlib rewrites the file in place
// when it finds the list stale, and a write through a link to a read-only file would raise instead.
struct FontList {
    std::string source;  // absolute host path, readable by the sandbox's uid
    std::string target;  // MPLCONFIGDIR/fontlist-vNNN.json inside, beneath /tmp, not in workdir
};

struct Rlimit {
    int resource;
    rlim_t soft;
    rlim_t hard;
};

// A count the kernel keeps per host user across user namespaces (/proc/sys/user/NAME): every
// process of that user, in a sandbox or not, charges the same count, up to the host's maximum.
// Written in the sandbox's own user namespace, `max` bounds what the sandbox can take of it.
struct UserCount {
    std::string name;  // under /proc/sys/user, e.g. "max_inotify_instances"
    std::uint64_t max;
};

struct IdMap {
    uid_t inner_uid = 1000;
    gid_t inner_gid = 1000;
    uid_t outer_uid = 0;  // the host uid the script runs as
    gid_t outer_gid = 0;
    bool privileged = false;  // invoked as root: map to an unprivileged uid, clear groups
};

struct Plan {
    Profile profile;  // the resolved profile after flags were applied
    IdMap ids;

    // Filesystem, in the order it is built.
    std::vector<BindMount> ro_binds;
    std::vector<Symlink> symlinks;
    std::vector<GeneratedFile> files;
    std::vector<std::string> devices;      // host device nodes bound into /dev
    std::vector<std::string> proc_masked;  // /proc entries hidden behind /dev/null or empty tmpfs
    std::vector<std::string> proc_readonly;
    std::string tmp_mount_options;  // for the writable /tmp tmpfs
    // /dev/shm, for POSIX semaphores and shared memory (multiprocessing's locks and queues), where
    // processes are allowed: a tmpfs of tmp_size. Empty: no /dev/shm.
    std::string shm_mount_options;
    std::string workdir{kWorkDir};
    std::vector<InputFile> inputs;
    // --output-dir: absolute; held open when it existed (empty), made after the run when not.
    std::optional<std::string> output_dir;
    sys::UniqueFd output_dir_fd;
    // --output-runs: output_dir (held open when it existed) keeps each run's artifacts in a new
    // run-N below it, made when the run is collected (artifacts::make_run_dir).
    bool output_runs = false;
    std::string inputs_tmpfs_options;         // the inputs' own tmpfs, sized to hold them
    std::optional<HostWorkdir> host_workdir;  // --workdir
    std::string hostname = "sandbox";
    std::optional<FontList> font_list;  // none: no list prepared, or no MPLCONFIGDIR in /tmp
    // --with-env: the environment's site/ on the host (env_store.hpp), bound read-only at
    // kPackagesDir; the child opens it before the staging root hides the host's /tmp. Empty: none.
    std::string packages_dir;
    std::string packages_id;

    // The program.
    Program::Kind program_kind = Program::Kind::code;
    std::string interpreter;
    std::vector<std::string> argv;
    std::size_t script_args = 0;  // where sys.argv[1:] begins in argv
    std::vector<std::string> envp;
    std::optional<std::string> stdin_program;  // `-`: fed to the interpreter's stdin, then EOF
    bool pass_stdin = true;                    // Request::pass_stdin
    std::string script_label;                  // for messages: the path, "-c" or "-"
    std::string script_file;  // as tracebacks name it: examples/risky.py, <string>, <cell>
    // A script file's place inside (/sandbox/x.py), which Python's tracebacks name: the engine
    // rewrites the `  File "/sandbox/x.py", line ` lines of its stderr to name script_file, the
    // caller's path as given. Empty: nothing to rewrite.
    std::string script_in_sandbox;
    // Where the program as given (the file, CODE or stdin) is kept: one of files[index],
    // argv[index] or stdin_program; none for a session, whose cells come later. Not a copy: a
    // script may be 16 MiB.
    struct ProgramText {
        enum class In { none, files, argv, stdin_program } in = In::none;
        std::size_t index = 0;
    } program_text;
    // SHA-256 of the program as given, for the incident log ("" for none). Computed when asked:
    // setting up libcrypto takes half a millisecond, and most runs log nothing.
    std::string script_sha256() const;

    // Where blocks are reported (--incident-log or policy.incident_log): opened for appending
    // before anything runs, so a bad path stops the run instead of losing the record.
    std::string incident_log_path;
    sys::UniqueFd incident_log;
    bool capture_output = false;  // --json: output goes into the result, not to stdout/stderr

    // Memory and processes through the caller's delegated cgroup v2, when it has one; else the
    // rlimits alone (cgroup_unavailable says why).
    std::optional<cgroup::Delegation> cgroup;
    std::string cgroup_unavailable;
    std::vector<Rlimit> rlimits;
    std::vector<UserCount> user_counts;
    cpu_set_t affinity{};  // the first limits.cpus of the CPUs pysandbox may use
    // All the CPUs pysandbox may use: the child pins itself to CPU_COUNT(affinity) of them,
    // beginning with the one it runs on (limits.cpp).
    cpu_set_t allowed_cpus{};
    std::vector<sock_filter> seccomp_program;  // loaded by the interpreter's process
    // Whether that filter hands denied calls to the supervisor. Not for a sandbox that nests
    // others (Program::Kind::zygote): its jobs' filters carry the listener, and the kernel allows
    // one listener per filter stack.
    bool seccomp_listener = true;
    // --trace-syscalls: the program loaded sends every call to the supervisor, which answers as
    // this one, the profile's, would.
    bool trace_syscalls = false;
    std::vector<sock_filter> profile_seccomp_program;
    landlock::Ruleset landlock;  // abi 0: the kernel lacks Landlock (degraded)
    int verbose = 0;

    // sandbox.kernel = "gvisor" (gvisor.hpp): init executes runsc, not the interpreter; the
    // program above (interpreter, argv, envp) is the bundle's, which runsc starts inside gVisor.
    struct Gvisor {
        std::string runsc;  // absolute host path, also the path inside (bound read-only)
        std::vector<std::string> argv;
        std::vector<std::string> envp;
        // runsc writes it once the container exists: init tells "runsc failed" from "the
        // script failed" by it.
        std::string started_file;
        // runsc run's own log (--debug-log, info level), in the state directory the container
        // cannot reach: init reads there whether gVisor delivered the script's end (init.cpp).
        std::string log_file;
        std::string state_mount_options;  // runsc's state directory: a tmpfs of its own
    };
    std::optional<Gvisor> gvisor;

    // NULL-terminated views of argv/envp (runsc's under gVisor), built once so the child does not
    // allocate.
    std::vector<const char*> argv_ptrs;
    std::vector<const char*> envp_ptrs;
};

// The seccomp filter's recipe for a profile (flags applied): its allowlist, the socket families
// its network needs, and, where RLIMIT_AS is the memory limit (no memory cgroup), the allocation
// watch. tools/prepare_seccomp.cpp compiles the shipped profiles' programs with it at build time.
seccomp::Recipe seccomp_recipe(const Profile& profile, bool memory_cgroup, bool trace = false);

// Applies a request's overrides to a profile (the values were checked by the front).
void apply_overrides(Profile& profile, const Overrides& overrides);

// Builds the immutable Plan. Throws UsageError (the program, host files and directories) or
// ProfileError. The Plan is heap allocated because argv_ptrs/envp_ptrs point into it.
//
// Program::Kind::check is `pysandbox check`: the analyzer runs as the program, under the
// profile's isolation and limits, with the script read-only at /sandbox/NAME; the profile's
// [policy] is its data, not a hook (a profile may deny the very modules it imports).
std::unique_ptr<const Plan> make_plan(Profile profile, const Request& request,
                                      const std::vector<std::string>& host_env);

}  // namespace pysandbox
