#include "plan/plan.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "embed/python_modules.hpp"
#include "embed/zygote_helper_blob.hpp"
#include "plan/env_store.hpp"
#include "plan/gvisor.hpp"
#include "plan/host_files.hpp"
#include "plan/policy.hpp"
#include "plan/program.hpp"
#include "plan/seccomp.hpp"
#include "proxy/proxy.hpp"
#include "sys/errors.hpp"
#include "sys/sha256.hpp"
#include "wire/fds.hpp"

namespace pysandbox {
namespace fs = std::filesystem;
namespace {

constexpr uid_t kOverflowId = 65534;  // "nobody": what root's sandboxes run as on the host
constexpr std::uint64_t kAllocationWatchFloor = 16ULL << 20;
// A zygote's RLIMIT_NPROC: its jobs' user namespaces are nested in its own, whose count includes
// theirs; each job sets its own limit.
constexpr rlim_t kNestedProcesses = 4096;

// Root of the host, not root of some container's user namespace: only then can the sandbox be
// mapped to another host uid and root's groups be dropped.
bool in_initial_user_namespace() {
    std::ifstream map("/proc/self/uid_map");
    unsigned long inner = 1, outer = 1, count = 0;
    return map >> inner >> outer >> count && inner == 0 && outer == 0 && count == 4294967295UL;
}

bool is_reserved(const std::string& path) {
    for (std::string_view reserved : {"/tmp", "/proc", "/dev", "/sandbox"})
        if (path == reserved || path.starts_with(std::string(reserved) + "/")) return true;
    return path == "/";
}

void add_ro_paths(const Profile& profile, Plan& plan) {
    std::vector<std::string> paths = profile.ro_paths;
    std::sort(paths.begin(), paths.end());  // parents before children
    for (const auto& raw : paths) {
        fs::path path = fs::path(raw).lexically_normal();
        std::string text = path.string();
        if (!path.is_absolute() || std::ranges::count(path, fs::path("..")) > 0)
            throw ProfileError("filesystem.ro: \"" + raw + "\" must be an absolute path");
        if (text.size() > 1 && text.back() == '/') text.pop_back();
        if (is_reserved(text))
            throw ProfileError("filesystem.ro: \"" + raw +
                               "\" is reserved (/, /tmp, /proc, /dev and /sandbox are the "
                               "sandbox's own)");
        struct stat st {};
        if (::lstat(text.c_str(), &st) != 0) continue;  // optional: /lib64 is not everywhere
        if (S_ISLNK(st.st_mode)) {
            plan.symlinks.push_back({text, fs::read_symlink(text).string()});
        } else if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
            plan.ro_binds.push_back({text, S_ISDIR(st.st_mode)});
        } else {
            throw ProfileError("filesystem.ro: \"" + raw +
                               "\" is neither a directory nor a regular file");
        }
    }
}

// The numeric libraries size their thread pools from the machine, not from the affinity mask;
// told the CPU count, they neither oversubscribe nor run into limits.max_procs.
constexpr const char* kThreadPoolVariables[] = {"OMP_NUM_THREADS",        "OPENBLAS_NUM_THREADS",
                                                "MKL_NUM_THREADS",        "NUMEXPR_NUM_THREADS",
                                                "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS"};

// The CPUs this process may run on, and the first `wanted` of them (fewer when there are fewer).
void choose_cpus(std::uint64_t wanted, Plan& plan) {
    cpu_set_t& allowed = plan.allowed_cpus;
    if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        throw SysError("sched_getaffinity", errno);
    cpu_set_t& picked = plan.affinity;
    CPU_ZERO(&picked);
    for (int cpu = 0; cpu < CPU_SETSIZE && static_cast<std::uint64_t>(CPU_COUNT(&picked)) < wanted;
         ++cpu)
        if (CPU_ISSET(cpu, &allowed)) CPU_SET(cpu, &picked);
}

// Both spellings: curl and requests read the lowercase ones, some tools only the uppercase.
// NO_PROXY is empty: every destination, localhost included, goes through the proxy.
void add_proxy_variables(std::map<std::string, std::string>& env) {
    for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"})
        env[name] = std::string(proxy::kProxyUrl);
    env["NO_PROXY"] = env["no_proxy"] = "";
}

void add_environment(const Overrides& overrides, const std::vector<std::string>& host_env,
                     Plan& plan) {
    std::map<std::string, std::string> host;
    for (const auto& entry : host_env)
        if (auto eq = entry.find('='); eq != std::string::npos)
            host.emplace(entry.substr(0, eq), entry.substr(eq + 1));

    std::map<std::string, std::string> env;
    env["MPLBACKEND"] = "module://" + std::string(python::kFiguresModule);
    env["PYSANDBOX_WORK_DIR"] = plan.workdir;
    const std::string threads = std::to_string(CPU_COUNT(&plan.affinity));
    for (const char* name : kThreadPoolVariables) env[name] = threads;
    // Under an address-space limit (no memory cgroup), glibc's malloc reserves 64 MiB of it for
    // each thread's arena: ten threads and a 1 GiB limit is "can't start new thread". Two arenas
    // cost a little contention instead.
    if (!plan.cgroup) env["MALLOC_ARENA_MAX"] = "2";
    for (const auto& [name, value] : plan.profile.env_set) env[name] = value;
    auto pass = [&](const std::string& name) {
        if (auto it = host.find(name); it != host.end()) env[name] = it->second;
    };
    for (const auto& name : plan.profile.env_pass) pass(name);
    if (plan.profile.network.mode == NetMode::proxy) add_proxy_variables(env);
    // A terminal reader sees output as it is printed, as with python3 at a terminal.
    if (::isatty(STDOUT_FILENO) && !env.contains("PYTHONUNBUFFERED")) env["PYTHONUNBUFFERED"] = "1";
    for (const auto& spec : overrides.env) {  // checked by the front (check_env_spec)
        auto eq = spec.find('=');
        std::string name = spec.substr(0, eq);
        if (eq == std::string::npos)
            pass(name);
        else
            env[name] = spec.substr(eq + 1);
    }
    // The audit hook's policy, for sitecustomize.py; after --env, which can neither replace it
    // nor add one the profile does not have.
    // A zygote's interpreter installs the hook from its start, for the jobs it forks (their
    // profile is its own): none of them runs a line, nor finds a module imported, without it.
    // Under gVisor the hook connects to its channel, and where the profile allows the script no
    // socket, sitecustomize connects the hook's and the driver's channels and then seals them
    // (gvisor.hpp).
    const bool gvisor = plan.profile.kernel == KernelChoice::gvisor;
    const std::string policy = policy::hook_arguments(
        plan.profile.policy, plan.profile.name,
        {kSandboxPythonDir, gvisor ? -1 : kPolicyFd, plan.program_kind == Program::Kind::zygote,
         gvisor ? kGvisorPolicySocket : std::string_view{}});
    // The sandbox's modules come first, whatever else is asked for: site imports the audit hook
    // from there. (Debian's python3 -s still imports sitecustomize from PYTHONPATH.) Under the
    // seal, the rest goes on sys.path only once the seal is in (gvisor::seal_argument).
    std::string& python_path = env["PYTHONPATH"];
    const std::string own =
        fs::path(kSandboxPythonDir).parent_path().string();  // no '/' at the end
    if (!plan.packages_dir.empty())
        python_path = std::string(kPackagesDir) + (python_path.empty() ? "" : ":" + python_path);
    const std::string seal =
        gvisor ? gvisor::seal_argument(
                     plan.profile, policy.empty() ? std::string_view{} : kGvisorPolicySocket,
                     plan.program_kind == Program::Kind::driver ? kGvisorControlSocket
                                                                : std::string_view{},
                     python_path)
               : std::string{};
    if (!seal.empty())  // what installs it: the zygote's helper, a native extension module
        plan.files.push_back({std::string(kSandboxPythonDir) + std::string(kZygoteHelperFile),
                              std::string(zygote::helper_library()), 0444});
    python_path = own + (python_path.empty() || !seal.empty() ? "" : ":" + python_path);
    for (const auto& [name, value] :
         {std::pair{policy::kPolicyVariable, &policy}, std::pair{gvisor::kSealVariable, &seal}}) {
        if (value->empty())
            env.erase(std::string(name));
        else
            env[std::string(name)] = *value;
    }
    for (const auto& [name, value] : env) plan.envp.push_back(name + "=" + value);
}

// --with-env: the environment named, found in the store and checked readable by the uid the
// script runs as (a store under /root is not, for root's runs as 65534).
void add_packages(const Overrides& overrides, const std::vector<std::string>& host_env,
                  Plan& plan) {
    if (!overrides.packages && !plan.profile.requirements.empty())
        throw UsageError("python.requirements: profile " + plan.profile.name +
                         " names packages, which this command does not install (run, session, "
                         "batch, mcp and kernel do): use a profile without them");
    if (!overrides.packages) return;
    const fs::path store = env_store::store_dir(overrides.cache_dir, host_env);
    plan.packages_id = env_store::resolve_id(store, *overrides.packages);
    env_store::check_env_trusted(store, plan.packages_id);  // nothing another user could change
    const fs::path site = env_store::site_dir(store, plan.packages_id);
    struct stat st {};
    if (::lstat(site.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        throw UsageError("--with-env: " + site.string() + ": not a directory");
    plan.packages_dir = site.string();
    if (plan.ids.privileged)
        for (fs::path dir = site; dir != dir.root_path(); dir = dir.parent_path())
            if (::stat(dir.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0)
                throw UsageError("--with-env: " + dir.string() +
                                 " cannot be entered by uid 65534, which the script runs as; "
                                 "chmod o+x it, or move the store (--cache-dir, " +
                                 std::string(env_store::kCacheVariable) + ")");
}

// Whether `path` is `dir` or lies beneath it (both lexically normal and absolute).
bool is_within(const fs::path& path, const fs::path& dir) {
    auto rel = path.lexically_relative(dir);
    return !rel.empty() && *rel.begin() != "..";
}

// MPLCONFIGDIR as the run will see it, when the child may create it: beneath /tmp (the only
// writable place), outside the workdir (files there are artifacts, or the host's with --workdir).
std::optional<fs::path> matplotlib_config_dir(const Plan& plan) {
    constexpr std::string_view kVariable = "MPLCONFIGDIR=";
    auto var = std::ranges::find_if(
        plan.envp, [&](const std::string& entry) { return entry.starts_with(kVariable); });
    if (var == plan.envp.end()) return std::nullopt;
    fs::path dir = fs::path(var->substr(kVariable.size())).lexically_normal();
    if (!dir.has_filename()) dir = dir.parent_path();  // a trailing '/'
    if (!dir.is_absolute() || dir == "/tmp" || !is_within(dir, "/tmp") ||
        is_within(dir, plan.workdir))
        return std::nullopt;
    return dir;
}

// The list the build prepared, share/pysandbox/matplotlib/fontlist-vNNN.json with NNN matplotlib's
// FontManager version: a list for another version is not the file matplotlib looks for, so it
// builds its own as before. The build leaves one; of several (put there by hand) the last by name.
std::optional<fs::path> prepared_font_list() {
    std::vector<fs::path> lists = built_files("matplotlib", "fontlist-v", ".json");
    if (lists.empty()) return std::nullopt;
    return lists.back();
}

// Root's sandboxes run as nobody with no groups: they read what the "other" bits of the file and
// of every directory above it allow (the caps they hold inside do not cover root's files).
// Anyone else's sandbox runs as themselves.
bool sandbox_can_read(const IdMap& ids, const fs::path& file) {
    if (!ids.privileged) return ::access(file.c_str(), R_OK) == 0;
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0 || !(st.st_mode & S_IROTH)) return false;
    for (fs::path dir = file.parent_path();; dir = dir.parent_path()) {
        if (::stat(dir.c_str(), &st) != 0 || !(st.st_mode & S_IXOTH)) return false;
        if (dir == dir.root_path()) return true;
    }
}

// A cache, not a requirement: without a prepared list, a list the sandbox could not read, or a
// MPLCONFIGDIR outside /tmp, matplotlib scans the fonts itself as it always did.
void add_font_list(Plan& plan) {
    auto config_dir = matplotlib_config_dir(plan);
    if (!config_dir) return;
    auto prepared = prepared_font_list();
    if (!prepared) return;
    std::error_code ec;
    fs::path source = fs::canonical(*prepared, ec);  // sandbox_can_read walks the real directories
    if (ec || !sandbox_can_read(plan.ids, source)) return;
    plan.font_list = FontList{source.string(), (*config_dir / prepared->filename()).string()};
}

void add_identity_files(Plan& plan) {
    const std::string uid = std::to_string(plan.ids.inner_uid);
    const std::string gid = std::to_string(plan.ids.inner_gid);
    plan.files.push_back({"/etc/passwd",
                          "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                          "sandbox:x:" +
                              uid + ":" + gid +
                              ":sandbox:/tmp:/usr/sbin/nologin\n"
                              "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
                          0444});
    plan.files.push_back(
        {"/etc/group", "root:x:0:\nsandbox:x:" + gid + ":\nnogroup:x:65534:\n", 0444});
    plan.files.push_back(
        {"/etc/hosts", "127.0.0.1 localhost " + plan.hostname + "\n::1 localhost\n", 0444});
    plan.files.push_back({"/etc/hostname", plan.hostname + "\n", 0444});
}

// The audit hook reaches the interpreter through site and PYTHONPATH: a flag that skips either
// would silently drop the [policy] layer, so it is refused instead.
void check_hook_reachable(const Profile& profile) {
    if (!profile.policy.wants_hook()) return;
    for (const auto& arg : profile.interpreter_args)
        if (arg.size() > 1 && arg[0] == '-' && arg[1] != '-' &&
            arg.find_first_of("IES") != std::string::npos)
            throw UsageError("python.args \"" + arg +
                             "\" keeps Python from loading the [policy] "
                             "audit hook (-I, -E and -S skip site or PYTHONPATH); remove it, or "
                             "empty policy.deny_imports and policy.deny_calls");
}

void find_cgroup(const Request& request, Plan& plan) {
    if (request.forked || request.program.kind == Program::Kind::zygote) {
        plan.cgroup_unavailable =
            "sandboxes forked by a zygote (--fork) have no cgroup of their own yet";
        return;
    }
    auto found = cgroup::find_own_delegation();
    if (auto* delegation = std::get_if<cgroup::Delegation>(&found))
        plan.cgroup = *delegation;
    else
        plan.cgroup_unavailable = std::get<cgroup::Unavailable>(found);
}

void add_rlimits(const Limits& limits, Plan& plan) {
    auto cpu_seconds = static_cast<rlim_t>(std::ceil(limits.cpu_time.count() / 1000.0));
    // A sandbox cannot raise a hard limit: where the caller's is lower, the caller's is the bound.
    rlimit caller{};
    rlim_t pending_signals = limits.pending_signals;
    if (::getrlimit(RLIMIT_SIGPENDING, &caller) == 0)
        pending_signals = std::min<rlim_t>(pending_signals, caller.rlim_max);
    // With a memory cgroup, memory.max counts what is really used; an address-space limit on top
    // would only break runtimes that reserve more than they touch.
    if (!plan.cgroup) {
        plan.rlimits.push_back({RLIMIT_AS, limits.memory, limits.memory});
        plan.rlimits.push_back({RLIMIT_DATA, limits.memory, limits.memory});
    }
    plan.rlimits.insert(
        plan.rlimits.end(),
        {
            {RLIMIT_CPU, cpu_seconds, cpu_seconds + 1},  // SIGXCPU first, SIGKILL a second later
            // Counted per user inside the namespace: the script's processes and threads, plus init.
            {RLIMIT_NPROC, limits.max_procs + 1, limits.max_procs + 1},
            {RLIMIT_NOFILE, limits.open_files, limits.open_files},
            {RLIMIT_FSIZE, limits.file_size, limits.file_size},
            {RLIMIT_CORE, 0, 0},
            {RLIMIT_MEMLOCK, 0, 0},
            {RLIMIT_MSGQUEUE, 0, 0},
            {RLIMIT_SIGPENDING, pending_signals, pending_signals},
        });
}

// The counts the kernel keeps for the host user across namespaces (UserCount). The namespace
// counts are 0: seccomp already refuses creating namespaces, this is the second wall. Keys and
// key bytes are counted per host user too, but the key calls are not among those a sandbox's
// filter allows (seccomp_table.cpp); POSIX message queues and locked memory are rlimits above.
void add_user_counts(const Limits& limits, Plan& plan) {
    plan.user_counts = {
        {"max_inotify_instances", limits.inotify_instances},
        {"max_inotify_watches", limits.inotify_watches},
        {"max_fanotify_groups", 0},
        {"max_fanotify_marks", 0},
    };
    for (const char* kind : {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup", "time"})
        plan.user_counts.push_back({std::string("max_") + kind + "_namespaces", 0});
}

}  // namespace

seccomp::Recipe seccomp_recipe(const Profile& profile, bool memory_cgroup, bool trace) {
    const auto sockets = profile.network.mode == NetMode::none ? seccomp::Sockets::unix_only
                                                               : seccomp::Sockets::unix_and_inet;
    // Where RLIMIT_AS is the memory limit, big allocations are watched: the evidence that one
    // failed at the limit (seccomp.hpp, AllocationWatch).
    std::optional<seccomp::AllocationWatch> watch;
    if (!memory_cgroup)
        watch = seccomp::AllocationWatch{
            std::max<std::uint64_t>(kAllocationWatchFloor, profile.limits.memory / 16)};
    return seccomp::recipe(profile.seccomp, sockets, watch, trace);
}

std::string Plan::script_sha256() const {
    switch (program_text.in) {
        case ProgramText::In::none: return {};
        case ProgramText::In::files: return Sha256::of(files.at(program_text.index).content);
        case ProgramText::In::argv: return Sha256::of(argv.at(program_text.index));
        case ProgramText::In::stdin_program: return Sha256::of(stdin_program.value());
    }
    return {};
}

void apply_overrides(Profile& profile, const Overrides& overrides) {
    Limits& limits = profile.limits;
    if (overrides.wall_time) limits.wall_time = *overrides.wall_time;
    if (overrides.cpu_time) limits.cpu_time = *overrides.cpu_time;
    if (overrides.memory) limits.memory = *overrides.memory;
    if (overrides.tmp_size) limits.tmp_size = *overrides.tmp_size;
    if (overrides.output_limit) limits.output_limit = *overrides.output_limit;
    if (overrides.idle_timeout) limits.idle_timeout = *overrides.idle_timeout;
    if (overrides.lifetime) limits.lifetime = *overrides.lifetime;
    if (overrides.cpus) limits.cpus = *overrides.cpus;
    if (overrides.max_procs) limits.max_procs = *overrides.max_procs;
    if (overrides.no_preload) profile.preload.clear();
    if (overrides.net) profile.network.mode = *overrides.net;
    if (overrides.kernel) profile.kernel = *overrides.kernel;
    // An allowed destination is added to the profile's list (a profile is the baseline, a flag one
    // more destination for this run) and asks for the proxy, whose list it is.
    for (const auto& rule : overrides.allow) profile.network.allow.add(rule);
    if (!overrides.allow.empty()) profile.network.mode = NetMode::proxy;
    // [policy]'s socket rules describe a sandbox without a network: once one is on, they would
    // only stand in its way (the proxy and its allowlist decide instead).
    if (profile.network.mode != NetMode::none) profile.policy.drop_socket_rules();
}

namespace {

void check_interpreter(const Plan& plan) {
    if (!fs::path(plan.interpreter).is_absolute())
        throw ProfileError("python.interpreter: \"" + plan.interpreter +
                           "\" must be an absolute path");
}

void choose_ids(IdMap& ids) {
    ids.privileged = ::geteuid() == 0 && in_initial_user_namespace();
    ids.outer_uid = ids.privileged ? kOverflowId : ::geteuid();
    ids.outer_gid = ids.privileged ? kOverflowId : ::getegid();
}

void add_filesystem(Plan& plan) {
    add_ro_paths(plan.profile, plan);
    plan.devices = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"};
    plan.proc_masked = {"/proc/kcore",         "/proc/kallsyms",    "/proc/keys",
                        "/proc/timer_list",    "/proc/sched_debug", "/proc/latency_stats",
                        "/proc/sysrq-trigger", "/proc/kmsg",        "/proc/acpi",
                        "/proc/scsi",          "/proc/firmware",    "/proc/interrupts"};
    plan.proc_readonly = {"/proc/sys", "/proc/bus", "/proc/fs", "/proc/irq"};
    plan.tmp_mount_options =
        "size=" + std::to_string(plan.profile.limits.tmp_size) +
        ",nr_inodes=65536,mode=0755,uid=" + std::to_string(plan.ids.inner_uid) +
        ",gid=" + std::to_string(plan.ids.inner_gid);
    if (plan.profile.seccomp.allow_processes)
        plan.shm_mount_options =
            "size=" + std::to_string(plan.profile.limits.tmp_size) +
            ",nr_inodes=4096,mode=0755,uid=" + std::to_string(plan.ids.inner_uid) +
            ",gid=" + std::to_string(plan.ids.inner_gid);
    add_identity_files(plan);
}

// The program for `recipe`: the one the build prepared, when there is one for exactly this
// recipe, else compiled now.
std::vector<sock_filter> seccomp_program(const seccomp::Recipe& recipe) {
    if (const fs::path data = installed_data_dir(); !data.empty())
        if (auto prepared = seccomp::read_prepared(data / "seccomp", recipe)) return *prepared;
    return seccomp::compile(recipe);
}

// What the kernel enforces: rlimits (or the cgroup), the seccomp filter, Landlock's rules.
void add_kernel_layers(Plan& plan) {
    add_rlimits(plan.profile.limits, plan);
    add_user_counts(plan.profile.limits, plan);
    const bool memory_cgroup = plan.cgroup.has_value();
    plan.seccomp_program = seccomp_program(seccomp_recipe(plan.profile, memory_cgroup));
    if (plan.trace_syscalls) {
        plan.profile_seccomp_program = std::move(plan.seccomp_program);
        plan.seccomp_program = seccomp_program(seccomp_recipe(plan.profile, memory_cgroup, true));
    }
    std::vector<std::string> readable{"/etc", std::string(kScriptDir)};
    for (const auto& bind : plan.ro_binds) readable.push_back(bind.source);
    std::vector<std::string> writable{"/tmp"};
    if (!plan.shm_mount_options.empty()) writable.emplace_back("/dev/shm");
    plan.landlock =
        landlock::plan_rules(landlock::kernel_abi(), plan.profile.network.mode, readable, writable);
}

// A sandbox that nests others (Program::Kind::zygote) is set up as any other but where a nested
// job's own setup would fail: its /proc has nothing mounted over it (a user namespace may mount
// procfs only where a fully visible one exists; each job masks its own), it has no Landlock (a
// Landlock-restricted task cannot mount), its seccomp filter is the nesting one without a listener,
// and its limits bound the zygote, not a job: no CPU-time limit (it lives across jobs), room for
// the jobs' processes, every CPU, and pysandbox's open-files limit: a job hands its seccomp
// listener over before it sets its own (limits.hpp, Which), with the limit it inherits from the
// zygote, which a sibling's descriptors in flight must not reach.
void relax_for_nesting(Plan& plan) {
    plan.proc_masked.clear();
    plan.proc_readonly.clear();
    plan.landlock = {};
    plan.seccomp_listener = false;
    plan.seccomp_program = seccomp::compile(
        seccomp::nesting_recipe(seccomp_recipe(plan.profile, plan.cgroup.has_value())));
    // Single-threaded: a clone copies only the calling thread, so a thread pool the preload
    // started would be missing (its locks held) in every job.
    for (std::string& entry : plan.envp)
        for (const char* name : kThreadPoolVariables)
            if (entry.starts_with(std::string(name) + "=")) entry = std::string(name) + "=1";
    for (Rlimit& limit : plan.rlimits) {
        if (limit.resource == RLIMIT_CPU) limit.soft = limit.hard = RLIM_INFINITY;
        if (limit.resource == RLIMIT_NPROC) limit.soft = limit.hard = kNestedProcesses;
    }
    std::erase_if(plan.rlimits,
                  [](const Rlimit& limit) { return limit.resource == RLIMIT_NOFILE; });
    // Its jobs' namespaces are nested in its own: the namespace counts bound each job instead
    // (job_spec.hpp carries them), the others bound the zygote and its jobs together.
    std::erase_if(plan.user_counts,
                  [](const UserCount& count) { return count.name.ends_with("_namespaces"); });
    // Each job picks its CPUs where it starts (limits.cpp): a zygote pinned to one would start,
    // and so pin, every job there.
    plan.affinity = plan.allowed_cpus;
}

void point_into_strings(Plan& plan) {
    const auto& argv = plan.gvisor ? plan.gvisor->argv : plan.argv;
    const auto& envp = plan.gvisor ? plan.gvisor->envp : plan.envp;
    for (const auto& arg : argv) plan.argv_ptrs.push_back(arg.c_str());
    plan.argv_ptrs.push_back(nullptr);
    for (const auto& var : envp) plan.envp_ptrs.push_back(var.c_str());
    plan.envp_ptrs.push_back(nullptr);
}

}  // namespace

std::unique_ptr<const Plan> make_plan(Profile profile, const Request& request,
                                      const std::vector<std::string>& host_env) {
    apply_overrides(profile, request.overrides);
    const Program& program = request.program;
    auto plan = std::make_unique<Plan>();
    plan->profile = std::move(profile);
    plan->verbose = request.verbose;
    plan->trace_syscalls = request.trace_syscalls;
    plan->program_kind = program.kind;
    plan->capture_output = request.capture_output || program.kind == Program::Kind::check;
    plan->pass_stdin = request.pass_stdin;
    plan->interpreter = plan->profile.interpreter;
    check_interpreter(*plan);
    choose_ids(plan->ids);
    add_filesystem(*plan);
    add_inputs(request.overrides, *plan);
    check_output_dir(request.overrides, *plan);
    check_host_workdir(request.overrides, *plan);
    choose_cpus(plan->profile.limits.cpus, *plan);
    add_program(program, *plan);
    // The analyzer carries the policy as data (add_program); a hook would only get in its way.
    if (program.kind == Program::Kind::check)
        plan->profile.policy = {{}, {}, plan->profile.policy.incident_log};
    check_hook_reachable(plan->profile);
    add_sandbox_python(program, *plan);
    find_cgroup(request, *plan);  // before the environment, which depends on it
    add_packages(request.overrides, host_env, *plan);
    add_environment(request.overrides, host_env, *plan);
    add_font_list(*plan);
    add_kernel_layers(*plan);
    if (program.kind == Program::Kind::zygote) relax_for_nesting(*plan);
    if (plan->profile.kernel == KernelChoice::gvisor) gvisor::put_on_gvisor(*plan, host_env);
    point_into_strings(*plan);
    open_incident_log(request.overrides.incident_log, *plan);  // last: bad input creates nothing
    return plan;
}

}  // namespace pysandbox
