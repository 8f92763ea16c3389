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
#include "plan/policy.hpp"
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
constexpr std::uintmax_t kMaxScriptBytes = 16 << 20;
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

std::string read_script(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw UsageError("script " + path + ": " + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) throw UsageError("script " + path + ": is a directory");
    if (!S_ISREG(st.st_mode)) throw UsageError("script " + path + ": not a regular file");
    if (static_cast<std::uintmax_t>(st.st_size) > kMaxScriptBytes)
        throw UsageError("script " + path + ": larger than 16 MiB");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError("script " + path + ": " + std::strerror(errno));
    std::ostringstream content;
    content << in.rdbuf();
    return content.str();
}

std::string read_all_stdin() {
    std::string text;
    char buffer[65536];
    for (;;) {
        ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw SysError("read(stdin)", errno);
        if (n == 0) break;
        text.append(buffer, static_cast<std::size_t>(n));
        if (text.size() > kMaxScriptBytes) throw UsageError("program on stdin: larger than 16 MiB");
    }
    return text;
}

// The script, read now, at /sandbox/NAME inside; returns that path.
std::string add_script_file(const std::string& host_path, Plan& plan) {
    std::string inside = std::string(kScriptDir) + "/" + fs::path(host_path).filename().string();
    plan.program_text = {Plan::ProgramText::In::files, plan.files.size()};
    plan.files.push_back({inside, read_script(host_path), 0444});
    return inside;
}

// `python3 -c` code that imports one of the sandbox's modules and runs its main(). Imported, a
// module's bytecode prepared at build time is used; named as a script, it would be compiled from
// source in every run. The directory goes first in sys.path whatever the flags (-I, -S).
std::string import_and_run(std::string_view module) {
    const std::string_view dir = kSandboxPythonDir.substr(0, kSandboxPythonDir.size() - 1);
    return "import sys; sys.path.insert(0, '" + std::string(dir) + "'); import " +
           std::string(module) + "; " + std::string(module) + ".main()";
}

void add_program(const Program& program, Plan& plan) {
    plan.argv.push_back(plan.interpreter);
    for (const auto& arg : plan.profile.interpreter_args) plan.argv.push_back(arg);
    switch (program.kind) {
        case Program::Kind::code:
            plan.argv.push_back("-c");
            plan.program_text = {Plan::ProgramText::In::argv, plan.argv.size()};
            plan.argv.push_back(program.text);
            plan.script_label = "-c";
            plan.script_file = "<string>";
            break;
        case Program::Kind::stdin_program:
            plan.stdin_program = read_all_stdin();
            plan.argv.push_back("-");
            plan.script_label = "-";
            plan.script_file = "<stdin>";
            plan.program_text = {Plan::ProgramText::In::stdin_program, 0};
            break;
        case Program::Kind::script_file:
            plan.script_file = add_script_file(program.text, plan);
            plan.argv.push_back(plan.script_file);
            plan.script_label = program.text;
            break;
        case Program::Kind::check: {
            // The analyzer needs the standard library only: no site (nor the .pth files it runs).
            plan.argv.push_back("-S");
            plan.argv.push_back("-c");
            plan.argv.push_back(import_and_run(python::kCheckModule));
            plan.argv.push_back(add_script_file(program.text, plan));
            plan.argv.push_back(policy::analyzer_argument(plan.profile.policy, plan.profile.name));
            plan.script_label = program.text;
            break;
        }
        case Program::Kind::zygote:
        case Program::Kind::driver: {
            // -c "import pysandbox_driver; ..." CONTROL_FD MODULE... (or pysandbox_zygote):
            // imported rather than named as a script, so its prepared bytecode is used. The
            // modules to preload stand where a script's arguments do (init's command line keeps
            // them); a cell or a job has no arguments of its own.
            const bool zygote = program.kind == Program::Kind::zygote;
            plan.argv.push_back("-c");
            plan.argv.push_back(
                import_and_run(zygote ? python::kZygoteModule : python::kDriverModule));
            plan.argv.push_back(std::to_string(kControlFd));
            plan.script_args = plan.argv.size();
            for (const auto& module : plan.profile.preload) plan.argv.push_back(module);
            plan.script_label = zygote ? "zygote" : "session";
            plan.script_file = zygote ? "<job>" : "<cell>";
            return;
        }
    }
    plan.script_args = plan.argv.size();
    for (const auto& arg : program.args) plan.argv.push_back(arg);
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
    const std::string policy = policy::hook_arguments(plan.profile.policy, plan.profile.name,
                                                      {kSandboxPythonDir, kPolicyFd});
    // A zygote never runs the hook: each job installs it (the job's plan carries the policy).
    if (policy.empty() || plan.program_kind == Program::Kind::zygote)
        env.erase(std::string(policy::kPolicyVariable));
    else
        env[std::string(policy::kPolicyVariable)] = policy;
    // The sandbox's modules come first, whatever else is asked for: site imports the audit hook
    // from there. (Debian's python3 -s still imports sitecustomize from PYTHONPATH.)
    std::string& python_path = env["PYTHONPATH"];
    const std::string own =
        fs::path(kSandboxPythonDir).parent_path().string();  // no '/' at the end
    python_path = own + (python_path.empty() ? "" : ":" + python_path);
    for (const auto& [name, value] : env) plan.envp.push_back(name + "=" + value);
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

// What the build left in share/pysandbox/SUBDIR: the regular files named PREFIX*SUFFIX, by name.
std::vector<fs::path> built_files(std::string_view subdir, std::string_view prefix,
                                  std::string_view suffix) {
    std::vector<fs::path> found;
    const fs::path data = installed_data_dir();
    if (data.empty()) return found;
    std::error_code ec;
    for (auto it = fs::directory_iterator(data / subdir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.starts_with(prefix) && name.ends_with(suffix) && it->is_regular_file(ec))
            found.push_back(it->path());
    }
    std::ranges::sort(found);
    return found;
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

// The input's host file, opened now as the caller: the sandbox reads a copy of what the caller
// may read (root's sandboxes run as uid 65534, but root named the file).
InputFile open_input(const InputSpec& spec) {
    const std::string source = fs::absolute(spec.source).lexically_normal().string();
    sys::UniqueFd fd(::open(source.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    if (!fd) throw UsageError("--input: " + spec.source + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
        throw UsageError("--input: " + spec.source + ": not a regular file");
    return {source, spec.name, std::move(fd)};
}

// The inputs' tmpfs holds exactly their pages (and an inode each); it is read-only once filled.
std::string inputs_tmpfs_options(const std::vector<InputFile>& inputs, const IdMap& ids) {
    constexpr std::uint64_t kPage = 4096;
    std::uint64_t pages = 16;
    for (const auto& input : inputs) {
        struct stat st {};
        if (::fstat(input.fd.get(), &st) == 0)
            pages += (static_cast<std::uint64_t>(st.st_size) + kPage - 1) / kPage + 1;
    }
    return "size=" + std::to_string(pages * kPage) +
           ",nr_inodes=" + std::to_string(inputs.size() + 16) +
           ",mode=0755,uid=" + std::to_string(ids.inner_uid) +
           ",gid=" + std::to_string(ids.inner_gid);
}

void add_inputs(const Overrides& overrides, Plan& plan) {
    for (const auto& spec : overrides.inputs) {
        for (const auto& earlier : plan.inputs)
            if (earlier.name == spec.name)
                throw UsageError("--input: two files named \"" + spec.name +
                                 "\" in /tmp/work (give one another name: FILE=NAME)");
        if (plan.inputs.size() == kMaxInputs)
            throw UsageError("--input: at most " + std::to_string(kMaxInputs) + " files");
        plan.inputs.push_back(open_input(spec));
    }
    if (!plan.inputs.empty())
        plan.inputs_tmpfs_options = inputs_tmpfs_options(plan.inputs, plan.ids);
}

// Whether the sandbox's host uid may create files in `dir`: the overlay checks the script's
// writes against the directory's own owner and mode, as a bind would.
bool sandbox_can_write(const IdMap& ids, const struct stat& st, const std::string& dir) {
    if (!ids.privileged) return ::access(dir.c_str(), W_OK | X_OK) == 0;
    return (st.st_uid == ids.outer_uid && (st.st_mode & S_IWUSR)) ||
           (st.st_mode & (S_IWOTH | S_IXOTH)) == (S_IWOTH | S_IXOTH);
}

// The script writes DIR (through the overlay) as ids.outer_uid, and pysandbox copies its
// changes back as the caller: both must be possible, or every write of the run would fail.
void check_host_workdir(const Overrides& overrides, Plan& plan) {
    if (!overrides.workdir) return;
    const std::string& given = *overrides.workdir;
    if (!overrides.inputs.empty())
        throw UsageError("--workdir: cannot be combined with --input (copy the files into " +
                         given + " instead)");
    const std::string dir = fs::absolute(given).lexically_normal().string();
    sys::UniqueFd fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0)
        throw UsageError("--workdir: " + given + ": " + std::strerror(errno));
    if (!S_ISDIR(st.st_mode)) throw UsageError("--workdir: " + given + ": not a directory");
    if (!sandbox_can_write(plan.ids, st, dir) || ::access(dir.c_str(), W_OK | X_OK) != 0)
        throw UsageError("--workdir: " + given + ": not writable by uid " +
                         std::to_string(plan.ids.outer_uid) + ", which the script runs as" +
                         (plan.ids.privileged ? " (chown 65534 it, or chmod o+rwx)" : ""));
    const std::string inner = std::to_string(plan.ids.inner_uid);
    const std::string staging = std::string(mounts::kStagingRoot) + "/" + mounts::kWorkdirLayers;
    HostWorkdir workdir{dir, std::move(fd), {}, {}};
    workdir.tmpfs_options = "size=" + std::to_string(plan.profile.limits.tmp_size) +
                            ",nr_inodes=65536,mode=0755,uid=" + inner +
                            ",gid=" + std::to_string(plan.ids.inner_gid);
    workdir.overlay_layers =
        ",upperdir=" + staging + "/upper,workdir=" + staging + "/work,userxattr";
    plan.host_workdir = std::move(workdir);
}

// Artifacts land only where the run itself made room: DIR must be empty (held open from now on)
// or absent (made after the run, in a parent that must exist), never a directory with content a
// copy could land in and later act from (a package, .git/hooks, a site-packages .pth).
void check_output_dir(const Overrides& overrides, Plan& plan) {
    if (!overrides.output_dir) return;
    std::string dir = fs::absolute(*overrides.output_dir).lexically_normal().string();
    if (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
        if (errno != ENOENT) throw UsageError("--output-dir: " + dir + ": " + std::strerror(errno));
        const std::string parent = fs::path(dir).parent_path().string();
        if (::access(parent.c_str(), W_OK | X_OK) != 0)
            throw UsageError("--output-dir: cannot create " + dir + ": " + parent + ": " +
                             std::strerror(errno));
        plan.output_dir = dir;
        return;
    }
    if (!S_ISDIR(st.st_mode)) throw UsageError("--output-dir: " + dir + ": not a directory");
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
        throw UsageError("--output-dir: " + dir + ": " + std::strerror(errno));
    std::error_code ec;
    if (!fs::is_empty(dir, ec))
        throw UsageError("--output-dir: " + dir +
                         " is not empty: artifacts go only into a new or empty directory (they "
                         "could otherwise land where a later program picks them up)");
    plan.output_dir_fd.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!plan.output_dir_fd) throw UsageError("--output-dir: " + dir + ": " + std::strerror(errno));
    plan.output_dir = dir;
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

void open_incident_log(const std::optional<std::string>& flag, Plan& plan) {
    const std::string& path = flag ? *flag : plan.profile.policy.incident_log;
    const char* source = flag ? "--incident-log" : "policy.incident_log";
    if (path.empty()) return;
    // O_NOFOLLOW: a link planted where the log goes does not redirect root's appends.
    plan.incident_log.reset(
        ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!plan.incident_log)
        throw UsageError(std::string(source) + ": cannot open \"" + path +
                         "\" for appending: " + std::strerror(errno));
    plan.incident_log_path = path;
}

// A module of src/python/ (embedded in the binary) into the sandbox's module directory, with the
// bytecode the build compiled from it (`compiled`: share/pysandbox/python/NAME.TAG.pyc, one per
// interpreter the build knew; each interpreter picks its own TAG): the directory is read-only and
// new for each run, so without it Python would compile the module on every start.
void add_sandbox_module(std::string_view name, const std::vector<fs::path>& compiled, Plan& plan) {
    const std::string dir(kSandboxPythonDir);
    const auto* module = std::ranges::find(python::kModules, name, &python::Module::name);
    plan.files.push_back({dir + std::string(name) + ".py", std::string(module->source), 0444});
    const std::string prefix = std::string(name) + ".";
    for (const fs::path& file : compiled) {
        if (!file.filename().string().starts_with(prefix)) continue;
        std::ifstream in(file, std::ios::binary);
        std::ostringstream bytes;
        bytes << in.rdbuf();  // in one block, not a character at a time
        std::string bytecode = std::move(bytes).str();
        if (in.bad() || bytecode.empty()) continue;  // a cache: Python compiles the source instead
        plan.files.push_back(
            {dir + "__pycache__/" + file.filename().string(), std::move(bytecode), 0444});
    }
}

// The sandbox's own modules: sitecustomize.py (which installs the [policy] audit hook when
// add_environment passes a policy) and the figure backend always; the analyzer for `check`; the
// cell driver for a session. All of them are the same in every run.
void add_sandbox_python(const Program& program, Plan& plan) {
    const std::vector<fs::path> compiled = built_files("python", "", ".pyc");
    add_sandbox_module(python::kSiteModule, compiled, plan);
    add_sandbox_module(python::kFiguresModule, compiled, plan);
    if (program.kind == Program::Kind::check)
        add_sandbox_module(python::kCheckModule, compiled, plan);
    if (program.kind == Program::Kind::driver)
        add_sandbox_module(python::kDriverModule, compiled, plan);
    if (program.kind == Program::Kind::zygote) {
        // The zygote runs the driver in each job it forks, so it imports it once, too.
        add_sandbox_module(python::kDriverModule, compiled, plan);
        add_sandbox_module(python::kZygoteModule, compiled, plan);
        const std::string dir(kSandboxPythonDir);
        plan.files.push_back(
            {dir + std::string(kZygoteHelperFile), std::string(zygote::helper_library()), 0444});
        plan.files.push_back({dir + std::string(kZygoteJobSpecFile), program.text, 0444});
    }
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
        });
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
    plan.landlock = landlock::plan_rules(landlock::kernel_abi(), readable, writable);
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
    // Each job picks its CPUs where it starts (limits.cpp): a zygote pinned to one would start,
    // and so pin, every job there.
    plan.affinity = plan.allowed_cpus;
}

void point_into_strings(Plan& plan) {
    for (const auto& arg : plan.argv) plan.argv_ptrs.push_back(arg.c_str());
    plan.argv_ptrs.push_back(nullptr);
    for (const auto& var : plan.envp) plan.envp_ptrs.push_back(var.c_str());
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
    add_environment(request.overrides, host_env, *plan);
    add_font_list(*plan);
    add_kernel_layers(*plan);
    if (program.kind == Program::Kind::zygote) relax_for_nesting(*plan);
    point_into_strings(*plan);
    open_incident_log(request.overrides.incident_log, *plan);  // last: bad input creates nothing
    return plan;
}

}  // namespace pysandbox
