#include "plan/gvisor.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "plan/plan.hpp"
#include "sys/errors.hpp"
#include "wire/sandbox_paths.hpp"

namespace pysandbox::gvisor {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

constexpr std::string_view kDefaultPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
// The container's name in runsc's state directory: one container per sandbox.
constexpr const char* kContainerId = "pysandbox";
// What runsc may create of each namespace kind: its sandbox and its gofer each take a user, mount,
// PID, network, IPC and UTS namespace, and the gofer a mount namespace more.
constexpr std::uint64_t kRuncNamespaces = 8;

// Calls runsc never makes whose kernel code is the most exposed to a hostile caller. Everything
// else is runsc's to use: its own filters on the sentry and the gofer are the allowlist.
constexpr const char* kDeniedAroundRunsc[] = {
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "open_by_handle_at",
    "name_to_handle_at",
    "fanotify_init",
    "iopl",
    "ioperm",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    "syslog",
    "lookup_dcookie",
    "vhangup",
    "uselib",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
};

std::string path_of(const std::vector<std::string>& host_env) {
    for (const auto& entry : host_env)
        if (entry.starts_with("PATH=")) return entry.substr(5);
    return std::string(kDefaultPath);
}

seccomp::Sockets sockets_for(const Profile& profile) {
    return profile.network.mode == NetMode::none ? seccomp::Sockets::unix_only
                                                 : seccomp::Sockets::unix_and_inet;
}

// Whether the profile's own filter lets the script make each of `names`.
bool allows(const Profile& profile, std::initializer_list<std::string_view> names) {
    const auto calls = seccomp::allowed_calls(profile.seccomp, sockets_for(profile));
    return std::ranges::all_of(names, [&](std::string_view name) {
        return std::ranges::find(calls, name) != calls.end();
    });
}

const char* rlimit_name(int resource) {
    switch (resource) {
        case RLIMIT_AS: return "RLIMIT_AS";
        case RLIMIT_DATA: return "RLIMIT_DATA";
        case RLIMIT_CPU: return "RLIMIT_CPU";
        case RLIMIT_NPROC: return "RLIMIT_NPROC";
        case RLIMIT_NOFILE: return "RLIMIT_NOFILE";
        case RLIMIT_FSIZE: return "RLIMIT_FSIZE";
        case RLIMIT_CORE: return "RLIMIT_CORE";
        case RLIMIT_MEMLOCK: return "RLIMIT_MEMLOCK";
        case RLIMIT_MSGQUEUE: return "RLIMIT_MSGQUEUE";
        case RLIMIT_SIGPENDING: return "RLIMIT_SIGPENDING";
        default: return nullptr;
    }
}

const char* compare_name(std::uint64_t op) {
    switch (op) {
        case SCMP_CMP_NE: return "SCMP_CMP_NE";
        case SCMP_CMP_LT: return "SCMP_CMP_LT";
        case SCMP_CMP_LE: return "SCMP_CMP_LE";
        case SCMP_CMP_EQ: return "SCMP_CMP_EQ";
        case SCMP_CMP_GE: return "SCMP_CMP_GE";
        case SCMP_CMP_GT: return "SCMP_CMP_GT";
        case SCMP_CMP_MASKED_EQ: return "SCMP_CMP_MASKED_EQ";
        default: return nullptr;
    }
}

}  // namespace

// --host-uds=open hands the script every host socket file in the sandbox's mounts as well as the
// channels: where the profile allows no socket (a minimal base, as strict's), no rule of gVisor's
// filter can let the channels' connections through and no other, so the seal takes them back.
bool can_connect(const Profile& profile) {
    return allows(profile, {"socket", "connect"});
}

bool needs_seal(const Profile& profile) {
    return !can_connect(profile);
}

namespace {

// Whether the interpreter has channels to connect to (gvisor.hpp): the audit hook's, the cell
// driver's.
bool has_channels(const Plan& plan) {
    return plan.profile.policy.wants_hook() || plan.program_kind == Program::Kind::driver;
}

// What the channels need of gVisor's filter beyond the profile's allowlist, each as narrow as
// the call sitecustomize.py makes: Python's socket(AF_UNIX, SOCK_SEQPACKET) (it adds
// SOCK_CLOEXEC), connect (seccomp sees no address), and the seal's own installation,
// seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC). With `action` ALLOW they go into
// the first filter; denied, they are the seal. Only the calls the profile does not allow itself.
std::vector<seccomp::Recipe::Rule> channel_calls(const Profile& profile, std::uint32_t action) {
    std::vector<seccomp::Recipe::Rule> rules;
    if (!allows(profile, {"socket"}))
        rules.push_back({action,
                         SCMP_SYS(socket),
                         {{0, SCMP_CMP_EQ, AF_UNIX, 0},
                          {1, SCMP_CMP_EQ, SOCK_SEQPACKET | SOCK_CLOEXEC, 0},
                          {2, SCMP_CMP_EQ, 0, 0}}});
    if (!allows(profile, {"connect"})) rules.push_back({action, SCMP_SYS(connect), {}});
    if (!allows(profile, {"seccomp"}))
        rules.push_back({action,
                         SCMP_SYS(seccomp),
                         {{0, SCMP_CMP_EQ, SECCOMP_SET_MODE_FILTER, 0},
                          {1, SCMP_CMP_EQ, SECCOMP_FILTER_FLAG_TSYNC, 0}}});
    return rules;
}

// `value` as JSON text, which holds only UTF-8: replacing a byte would hand the script other
// arguments, environment or working directory than the caller's, so text that is not UTF-8 is
// refused.
std::string dump_utf8(const json& value, int indent = -1) {
    try {
        return value.dump(indent);
    } catch (const json::type_error&) {  // the one a dump throws: text that is not UTF-8
        throw UsageError(
            "sandbox.kernel = \"gvisor\" passes the script's arguments, environment and "
            "working directory to runsc as JSON (the OCI bundle's config.json), which holds only "
            "UTF-8 text: one of them is not UTF-8; rename or re-encode it, or run on the host "
            "kernel (--kernel host)");
    }
}

// A rule's action as OCI spells it; a call for the supervisor becomes the default's.
//
// Debian 12's runsc ignores errnoRet: every SCMP_ACT_ERRNO answers EPERM. The calls the profile
// answers ENOSYS (clone3, openat2, futex_waitv...: seccomp_table.cpp) must get ENOSYS, or glibc
// does not fall back to the older call and no thread starts. gVisor answers SCMP_ACT_TRACE with
// ENOSYS when no tracer is attached, which holds while the script cannot ptrace
// (`trace_is_enosys`: the profile does not allow it); otherwise they get EPERM too.
json oci_action(std::uint32_t action, const json& denied, bool trace_is_enosys) {
    if (action == SCMP_ACT_ALLOW) return {{"action", "SCMP_ACT_ALLOW"}};
    if ((action & ~0xffffU) == SCMP_ACT_ERRNO(0)) {
        if ((action & 0xffffU) == ENOSYS && trace_is_enosys) return {{"action", "SCMP_ACT_TRACE"}};
        return {{"action", "SCMP_ACT_ERRNO"}, {"errnoRet", action & 0xffffU}};
    }
    return denied;
}

// The container: the sandbox's root read-only, its /tmp read-write, gVisor's own /proc, /dev and
// /dev/shm, and the bundle's directory covered so the script cannot read runsc's state.
json mounts(const Plan& plan) {
    auto bind = [](std::string_view path) {
        return json{{"destination", path},
                    {"type", "bind"},
                    {"source", path},
                    {"options", {"rbind", "rw", "nosuid", "nodev", "noexec"}}};
    };
    auto read_only_tmpfs = [](std::string_view path) {
        return json{{"destination", path},
                    {"type", "tmpfs"},
                    {"source", "tmpfs"},
                    {"options", {"ro", "nosuid", "nodev", "noexec"}}};
    };
    // gVisor's own tmpfs takes no size here (its pages are the sentry's memory, beyond the
    // script's rlimits), and the script is uid 0 inside (bundle_config), its owner: none is
    // writable. What the script may write is the sandbox's tmpfs, bound in and sized by the host;
    // /dev's nodes the script writes to are the sandbox's too (gVisor refuses writes to a device
    // on a read-only mount).
    json list = json::array();
    list.push_back({{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}});
    list.push_back(read_only_tmpfs("/dev"));
    for (std::string_view device : {"/dev/null", "/dev/zero", "/dev/full"})
        list.push_back(bind(device));
    list.push_back(bind("/tmp"));
    list.push_back(plan.shm_mount_options.empty() ? read_only_tmpfs("/dev/shm") : bind("/dev/shm"));
    list.push_back(read_only_tmpfs(kGvisorDir));
    // The channels' sockets, alone in their directory (runsc binds no single socket): read-only,
    // so the script can neither remove them nor put anything beside them; connect still works.
    if (has_channels(plan)) {
        json channel = bind(kGvisorChannelDir);
        channel["options"][1] = "ro";
        list.push_back(std::move(channel));
    }
    return list;
}

std::string bundle_config(const Plan& plan, const seccomp::Recipe& inside) {
    json rlimits = json::array();
    for (const Rlimit& limit : plan.rlimits)
        if (const char* name = rlimit_name(limit.resource))
            rlimits.push_back({{"type", name}, {"hard", limit.hard}, {"soft", limit.soft}});
    json config = {
        {"ociVersion", "1.0.2"},
        {"process",
         {{"terminal", false},
          // runsc --rootless maps the sandbox's uid to gVisor's 0, so /tmp's files are the
          // script's as uid 0 there; with no capability, that root is an ordinary user of
          // gVisor's kernel, and the host's uid is the sandbox's either way.
          {"user", {{"uid", 0}, {"gid", 0}}},
          {"args", plan.argv},
          {"env", plan.envp},
          {"cwd", plan.workdir},
          {"capabilities",
           {{"bounding", json::array()},
            {"effective", json::array()},
            {"inheritable", json::array()},
            {"permitted", json::array()},
            {"ambient", json::array()}}},
          {"rlimits", std::move(rlimits)},
          {"noNewPrivileges", true}}},
        {"root", {{"path", "/"}, {"readonly", true}}},
        {"hostname", plan.hostname},
        {"mounts", mounts(plan)},
        {"linux",
         {{"namespaces",
           {{{"type", "pid"}},
            {{"type", "network"}},
            {{"type", "ipc"}},
            {{"type", "uts"}},
            {{"type", "mount"}}}},
          {"seccomp", json::parse(oci_seccomp(inside, plan.profile.seccomp.kill,
                                              allows(plan.profile, {"ptrace"})))}}},
    };
    return dump_utf8(config, 1) + "\n";
}

// Who else could replace the runsc at `real` (a canonical path): the file or a directory above
// it owned by another user than root and the caller, or writable by others (a sticky directory
// aside: there only an entry's owner can rename it, and that owner is checked one step down).
// runsc is the sandbox's kernel: whoever can swap it runs the script without gVisor, and the
// result would still say gVisor. Returns what is wrong, or nothing.
std::string replaceable_by_others(const fs::path& real) {
    const uid_t caller = ::geteuid();
    for (fs::path path = real;; path = path.parent_path()) {
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0) return path.string() + " cannot be inspected";
        if (st.st_uid != 0 && st.st_uid != caller)
            return path.string() + " belongs to uid " + std::to_string(st.st_uid);
        const bool sticky_dir = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) != 0;
        if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !sticky_dir)
            return path.string() + " is writable by its group or others";
        if (path == path.root_path()) return {};
    }
}

}  // namespace

std::string find_runsc(const std::vector<std::string>& host_env) {
    std::stringstream dirs(path_of(host_env));
    for (std::string dir; std::getline(dirs, dir, ':');) {
        if (dir.empty() || dir.front() != '/') continue;  // only absolute entries count
        const fs::path candidate = fs::path(dir) / "runsc";
        if (::access(candidate.c_str(), X_OK) == 0) {
            std::error_code ec;
            const fs::path real = fs::canonical(candidate, ec);
            if (ec) continue;
            if (const std::string why = replaceable_by_others(real); !why.empty())
                throw SysError("sandbox.kernel = \"gvisor\": refusing " + candidate.string() +
                                   " (found on PATH): " + why +
                                   ", so another user could replace gVisor",
                               EPERM,
                               "install runsc where only root can change it (Debian and Ubuntu: "
                               "apt-get install runsc puts it in /usr/bin), or take that "
                               "directory off PATH");
            return real.string();
        }
    }
    throw SysError("sandbox.kernel = \"gvisor\": runsc (gVisor) not found on PATH", ENOENT,
                   "install it (Debian and Ubuntu: apt-get install runsc), or run on the host "
                   "kernel (--kernel host); pysandbox doctor says whether gVisor works here");
}

seccomp::Recipe runsc_recipe() {
    seccomp::Recipe recipe;
    recipe.default_action = SCMP_ACT_ALLOW;
    for (const char* name : kDeniedAroundRunsc)
        if (int nr = seccomp_syscall_resolve_name(name); nr != __NR_SCMP_ERROR && nr >= 0)
            recipe.rules.push_back({SCMP_ACT_ERRNO(EPERM), nr, {}});
    return recipe;
}

std::string oci_seccomp(const seccomp::Recipe& inside, bool kill, bool ptrace_allowed) {
    const json denied = kill ? json{{"action", "SCMP_ACT_KILL"}}
                             : json{{"action", "SCMP_ACT_ERRNO"}, {"errnoRet", EPERM}};
    json syscalls = json::array();
    for (const auto& rule : inside.rules) {
        std::unique_ptr<char, decltype(&std::free)> name(
            seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, rule.nr), &std::free);
        if (!name) continue;  // not a call of this architecture: the default refuses it
        json entry = oci_action(rule.action, denied, !ptrace_allowed);
        entry["names"] = {name.get()};
        // runsc looks a name up in gVisor's own syscall table and skips one it does not know;
        // older gVisor (Debian 12's) names 270 "pselect", so without it select.select got EPERM.
        if (std::string_view(name.get()) == "pselect6") entry["names"].push_back("pselect");
        json args = json::array();
        for (const auto& [index, op, value, value_two] : rule.args)
            if (const char* compare = compare_name(op))
                args.push_back(
                    {{"index", index}, {"value", value}, {"valueTwo", value_two}, {"op", compare}});
        if (!args.empty()) entry["args"] = std::move(args);
        syscalls.push_back(std::move(entry));
    }
    json filter = denied;
    filter["defaultAction"] = filter["action"];
    filter.erase("action");
    if (filter.contains("errnoRet")) filter["defaultErrnoRet"] = filter["errnoRet"];
    filter.erase("errnoRet");
    filter["architectures"] = {"SCMP_ARCH_X86_64"};
    filter["syscalls"] = std::move(syscalls);
    return filter.dump();
}

seccomp::Recipe seal_recipe(const Profile& profile) {
    seccomp::Recipe seal;
    seal.default_action = SCMP_ACT_ALLOW;  // gVisor's first filter still answers the rest
    seal.rules = channel_calls(
        profile, profile.seccomp.kill ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ERRNO(EPERM));
    return seal;
}

std::string seal_argument(const Profile& profile, std::string_view hook_socket,
                          std::string_view control_socket, std::string_view later_path) {
    if (!needs_seal(profile) || (hook_socket.empty() && control_socket.empty())) return {};
    const std::vector<sock_filter> program = seccomp::compile(seal_recipe(profile));
    // Its bytes as numbers, Python's bytes() of them: the struct sock_filter array, as here.
    const auto* bytes = reinterpret_cast<const unsigned char*>(program.data());
    const std::vector<unsigned> numbers(bytes, bytes + program.size() * sizeof(sock_filter));
    // PYTHONPATH (the caller's) may hold what is not UTF-8, as the bundle's environment may.
    return dump_utf8(json::array({std::string(kSandboxPythonDir) + std::string(kZygoteHelperFile),
                                  numbers, hook_socket, control_socket, later_path}));
}

void put_on_gvisor(Plan& plan, const std::vector<std::string>& host_env) {
    if (plan.profile.network.mode == NetMode::proxy)
        throw UsageError(
            "sandbox.kernel = \"gvisor\" has network none or loopback, not the proxy: gVisor's "
            "network stack would need a way out of the sandbox's namespace to reach it");
    if (plan.program_kind == Program::Kind::zygote)
        throw UsageError(
            "sandbox.kernel = \"gvisor\" has no fork server (batch --fork) yet: run the batch "
            "without --fork, or use a profile with sandbox.kernel = \"host\"");
    if (plan.trace_syscalls)
        throw UsageError(
            "--trace-syscalls lists what the host kernel's seccomp filter sees; "
            "under sandbox.kernel = \"gvisor\" the script's calls go to gVisor");
    Plan::Gvisor gvisor;
    gvisor.runsc = find_runsc(host_env);
    const bool visible = std::ranges::any_of(plan.ro_binds, [&](const BindMount& bind) {
        const auto rel = fs::path(gvisor.runsc).lexically_relative(bind.source);
        return bind.is_directory && !rel.empty() && *rel.begin() != "..";
    });
    if (!visible) plan.ro_binds.push_back({gvisor.runsc, false});
    const std::string dir(kGvisorDir);
    const std::string state = dir + "/state";
    gvisor.started_file = state + "/container.pid";
    gvisor.log_file = state + "/run.log";
    // --debug-log: the run command's own log, where init reads how runsc ended (init.cpp,
    // judge_runsc); not the sandbox's or the gofer's, which would cost their start.
    gvisor.argv = {gvisor.runsc,
                   "--rootless",
                   "--network=none",
                   "--platform=" + std::string(kPlatform),
                   "--root=" + state + "/runsc",
                   "--ignore-cgroups",
                   "--oci-seccomp",
                   "--debug-log=" + gvisor.log_file,
                   "--debug-command=run",
                   "run",
                   "--bundle=" + dir + "/bundle",
                   "--pid-file=" + gvisor.started_file,
                   kContainerId};
    // The channels: host sockets the hook and the driver connect to (gvisor.hpp), a flag of
    // runsc itself, before its command.
    if (has_channels(plan))
        gvisor.argv.insert(std::ranges::find(gvisor.argv, "run"), "--host-uds=open");
    gvisor.state_mount_options =
        "size=16m,nr_inodes=4096,mode=0700,uid=" + std::to_string(plan.ids.inner_uid) +
        ",gid=" + std::to_string(plan.ids.inner_gid);
    gvisor.envp = {"PATH=" + std::string(kDefaultPath), "TMPDIR=" + state, "HOME=" + state};

    // The CPU-time limit is the supervisor's, over runsc's processes beyond runsc's start
    // (engine/sandbox.cpp, on_cpu_watch): gVisor's own, which would end the script with an exit
    // code it could forge, and the host's on each of runsc's processes, which counts runsc's start
    // too, only back it up, at twice the limit and a second more.
    for (Rlimit& limit : plan.rlimits)
        if (limit.resource == RLIMIT_CPU && limit.hard != RLIM_INFINITY) {
            limit.soft = 2 * limit.soft + 1;
            limit.hard = limit.soft + 1;
        }
    // The script's own filter, without the supervisor: inside, gVisor enforces it; with the
    // channels' calls where the profile lacks them, which the seal takes back before the script
    // runs (seal_argument).
    seccomp::Recipe inside =
        seccomp::recipe(plan.profile.seccomp, sockets_for(plan.profile), std::nullopt);
    if (has_channels(plan) && needs_seal(plan.profile))
        std::ranges::move(channel_calls(plan.profile, SCMP_ACT_ALLOW),
                          std::back_inserter(inside.rules));
    plan.files.push_back({dir + "/bundle/config.json", bundle_config(plan, inside), 0444});
    plan.gvisor = std::move(gvisor);

    // A user namespace may mount procfs only where a fully visible one exists: runsc's gofer and
    // sandbox mount their own, so nothing is masked on the sandbox's, which only runsc sees (the
    // script sees gVisor's /proc).
    plan.proc_masked.clear();
    plan.proc_readonly.clear();
    plan.landlock = {};
    plan.seccomp_listener = false;
    plan.seccomp_program = seccomp::compile(runsc_recipe());
    for (UserCount& count : plan.user_counts)
        if (count.name.ends_with("_namespaces") && count.name != "max_time_namespaces")
            count.max = kRuncNamespaces;
    std::erase_if(plan.rlimits, [](const Rlimit& limit) {
        return limit.resource == RLIMIT_AS || limit.resource == RLIMIT_DATA ||
               limit.resource == RLIMIT_NPROC || limit.resource == RLIMIT_NOFILE ||
               limit.resource == RLIMIT_FSIZE;
    });
}

}  // namespace pysandbox::gvisor
