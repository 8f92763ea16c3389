#include "plan/seccomp.hpp"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/sched.h>
#include <linux/sockios.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>

#include "plan/host_files.hpp"
#include "sys/errors.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox::seccomp {
namespace {

struct CtxRelease {
    void operator()(scmp_filter_ctx ctx) const noexcept { seccomp_release(ctx); }
};
using SeccompCtx = std::unique_ptr<void, CtxRelease>;

// Denied calls that also get ENOSYS (through the supervisor, recorded): kernel attack surface a
// library may probe for, where "not in this kernel" is the answer it handles best.
constexpr const char* kEnosysDenials[] = {
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "pidfd_open",
    "pidfd_getfd",
    "process_madvise",
    "memfd_secret",
    "set_mempolicy_home_node",
    "landlock_create_ruleset",
    "landlock_add_rule",
    "landlock_restrict_self",
    "userfaultfd",
    "bpf",
    "perf_event_open",
};

// ioctl requests the interpreter and the libraries make on their own descriptors. Everything
// else (TIOCSTI and TIOCLINUX, which inject into a terminal, among them) is denied with ENOTTY.
constexpr unsigned long kIoctls[] = {
    TCGETS,      // isatty() on every open(), on stdio
    TIOCGWINSZ,  // shutil.get_terminal_size, argparse, traceback formatting
    FIONREAD,    // bytes waiting
    FIONBIO,     // socket.setblocking, os.set_blocking
    FIONCLEX,    // os.set_inheritable (the audit hook calls it at start-up)
    FIOCLEX,
};

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif
// prctl options: naming threads, libcap's probe, glibc's naming of anonymous mappings.
constexpr unsigned long kPrctls[] = {PR_SET_NAME, PR_GET_NAME, PR_CAPBSET_READ, PR_SET_VMA};

constexpr std::uint64_t kLow32 = 0xffffffffULL;
constexpr std::uint64_t kNewNamespaces = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS |
                                         CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;

// One comparison of argument `index` with `value` (libseccomp's SCMP_An with the unused second
// datum spelled out, as -Wmissing-field-initializers asks).
constexpr scmp_arg_cmp argument(unsigned index, scmp_compare op, scmp_datum_t value) {
    return {index, op, value, 0};
}

void add_rule(Recipe& recipe, std::uint32_t action, int nr,
              std::initializer_list<scmp_arg_cmp> args = {}) {
    Recipe::Rule rule{action, nr, {}};
    for (const scmp_arg_cmp& arg : args)
        rule.args.push_back(
            {arg.arg, static_cast<std::uint64_t>(arg.op), arg.datum_a, arg.datum_b});
    recipe.rules.push_back(std::move(rule));
}

int resolve(const char* name) {
    return seccomp_syscall_resolve_name(name);
}

bool allows_level(const Settings& settings, Level level) {
    switch (level) {
        case Level::minimal: return true;
        case Level::standard: return settings.base == Base::standard;
        case Level::processes: return settings.allow_processes;
    }
    return false;
}

// The unconditionally allowed names: the table's rows for these settings, plus `allow`, less
// `deny`, less the calls whose arguments are checked.
std::set<std::string> unconditional(const Settings& settings) {
    std::set<std::string> names;
    for (const Allowed& row : allowlist_table())
        if (allows_level(settings, row.level)) names.insert(row.name);
    for (const auto& name : settings.allow) names.insert(name);
    for (const auto& name : settings.deny) names.erase(name);
    return names;
}

bool denied(const Settings& settings, std::string_view name) {
    return std::ranges::find(settings.deny, name) != settings.deny.end();
}

bool explicitly_allowed(const Settings& settings, std::string_view name) {
    return std::ranges::find(settings.allow, name) != settings.allow.end();
}

// The calls allowed only with some arguments. An unconditional rule would replace them
// (libseccomp), so a call the profile's `allow` names outright is not filtered here.
void add_argument_rules(Recipe& recipe, const Settings& settings, Sockets sockets) {
    auto filtered = [&](const char* name) {
        return !denied(settings, name) && !explicitly_allowed(settings, name);
    };
    if (filtered("ioctl"))
        for (unsigned long request : kIoctls)
            add_rule(recipe, SCMP_ACT_ALLOW, SCMP_SYS(ioctl),
                     {SCMP_A1(SCMP_CMP_MASKED_EQ, kLow32, request)});
    if (filtered("prctl"))
        for (unsigned long option : kPrctls)
            add_rule(recipe, SCMP_ACT_ALLOW, SCMP_SYS(prctl),
                     {SCMP_A0(SCMP_CMP_MASKED_EQ, kLow32, option)});
    if (filtered("clone")) {
        // A thread, or with processes allowed a process; never a new namespace.
        const std::uint64_t thread = settings.allow_processes ? 0 : CLONE_THREAD;
        add_rule(recipe, SCMP_ACT_ALLOW, SCMP_SYS(clone),
                 {SCMP_A0(SCMP_CMP_MASKED_EQ, kNewNamespaces | thread, thread)});
    }
    if (filtered("socket") && settings.base == Base::standard) {
        std::vector<int> families{AF_UNIX};
        if (sockets == Sockets::unix_and_inet) families.insert(families.end(), {AF_INET, AF_INET6});
        // A full 64-bit compare: garbage in the upper half is refused.
        for (int family : families)
            add_rule(recipe, SCMP_ACT_ALLOW, SCMP_SYS(socket),
                     {argument(0, SCMP_CMP_EQ, static_cast<scmp_datum_t>(family))});
    }
    // personality() may only be queried: a changed persona (READ_IMPLIES_EXEC,
    // ADDR_NO_RANDOMIZE) weakens the process.
    if (filtered("personality"))
        add_rule(recipe, SCMP_ACT_ALLOW, SCMP_SYS(personality),
                 {argument(0, SCMP_CMP_EQ, 0xffffffffULL)});
}

// mmap and mremap below the threshold pass; bigger ones go to the supervisor (see
// AllocationWatch).
void add_watched_allocations(Recipe& recipe, const AllocationWatch& watch) {
    add_rule(recipe, SCMP_ACT_ALLOW, SCMP_SYS(mmap), {argument(1, SCMP_CMP_LT, watch.threshold)});
    add_rule(recipe, SCMP_ACT_ALLOW, SCMP_SYS(mremap), {argument(2, SCMP_CMP_LT, watch.threshold)});
}

void add_fallbacks(Recipe& recipe, const Settings& settings) {
    for (const char* name : fallback_calls()) {
        if (explicitly_allowed(settings, name)) continue;
        if (int nr = resolve(name); nr != __NR_SCMP_ERROR)
            add_rule(recipe, SCMP_ACT_ERRNO(ENOSYS), nr);
    }
    // libseccomp 2.5.4 may not name fchmodat2 (Linux 6.6); glibc 2.39 falls back from it.
    if (resolve("fchmodat2") == __NR_SCMP_ERROR && !explicitly_allowed(settings, "fchmodat2"))
        add_rule(recipe, SCMP_ACT_ERRNO(ENOSYS), 452);
}

std::vector<sock_filter> export_program(scmp_filter_ctx ctx) {
    // libseccomp 2.5 exports only to a file descriptor.
    sys::UniqueFd memfd(check_sys(::memfd_create("seccomp-bpf", MFD_CLOEXEC), "memfd_create"));
    if (int rc = seccomp_export_bpf(ctx, memfd.get()); rc < 0)
        throw SysError("seccomp_export_bpf", -rc);
    off_t size = check_sys(::lseek(memfd.get(), 0, SEEK_END), "lseek(seccomp-bpf)");
    std::vector<sock_filter> program(static_cast<std::size_t>(size) / sizeof(sock_filter));
    if (::pread(memfd.get(), program.data(), static_cast<std::size_t>(size), 0) != size)
        throw SysError("pread(seccomp-bpf)", errno);
    return program;
}

SeccompCtx new_context(std::uint32_t default_action) {
    SeccompCtx ctx(seccomp_init(default_action));
    if (!ctx) throw SysError("seccomp_init", ENOMEM);
    // Only the native ABI: an i386 (int 0x80) or x32 call kills the process.
    if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        rc < 0)
        throw SysError("seccomp_attr_set(ACT_BADARCH)", -rc);
    // A binary tree by syscall number: a third of the instructions per call.
    if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2); rc < 0)
        throw SysError("seccomp_attr_set(CTL_OPTIMIZE, 2)", -rc);
    return ctx;
}

// The highest syscall number libseccomp names on `arch`: above it, a call is newer than the
// policy.
int highest_known(std::uint32_t arch) {
    static const int x86_64 = [] {
        int highest = 0;
        for (int nr = 0; nr < 1024; ++nr)
            if (std::unique_ptr<char, decltype(&std::free)> name(
                    seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr), &std::free);
                name)
                highest = nr;
        return highest;
    }();
    return arch == SCMP_ARCH_X86_64 ? x86_64 : 0;
}

}  // namespace

std::vector<std::string> allowed_calls(const Settings& settings, Sockets sockets) {
    std::set<std::string> names = unconditional(settings);
    for (const char* filtered : {"ioctl", "prctl", "clone", "personality"})
        if (!denied(settings, filtered)) names.insert(filtered);
    if (settings.base == Base::standard && !denied(settings, "socket")) names.insert("socket");
    (void)sockets;  // the families differ, not the calls
    return {names.begin(), names.end()};
}

bool is_known_syscall(std::string_view name) {
    return resolve(std::string(name).c_str()) != __NR_SCMP_ERROR;
}

Recipe recipe(const Settings& settings, Sockets sockets, std::optional<AllocationWatch> watch,
              bool trace) {
    Recipe recipe;
    if (trace) {
        // Everything is asked about, but what the interpreter's process calls after loading the
        // filter and before its listener reaches the supervisor (init.cpp).
        for (const char* name : {"sendmsg", "close"})
            add_rule(recipe, SCMP_ACT_ALLOW, resolve(name));
        return recipe;
    }
    std::set<std::string> names = unconditional(settings);
    if (watch && !explicitly_allowed(settings, "mmap") && !explicitly_allowed(settings, "mremap")) {
        names.erase("mmap");
        names.erase("mremap");
        add_watched_allocations(recipe, *watch);
    }
    for (const auto& name : names)
        if (int nr = resolve(name.c_str()); nr != __NR_SCMP_ERROR)
            add_rule(recipe, SCMP_ACT_ALLOW, nr);
    add_argument_rules(recipe, settings, sockets);
    add_fallbacks(recipe, settings);
    return recipe;
}

namespace {

// What setting up a job takes beyond what the job itself may do (nesting_recipe).
constexpr const char* kJobSetupCalls[] = {
    "unshare",
    "mount",
    "umount2",
    "mount_setattr",      // the read-only binds over /proc (mounts.cpp, bind_readonly)
    "sched_setaffinity",  // each job picks its CPUs (limits.cpp)
    "sethostname",
    "setrlimit",
    "prlimit64",
    "capset",
    "capget",
    "seccomp",
    "pidfd_open",
    "wait4",
    "waitid",
    "setsid",
    "close_range",
    "landlock_create_ruleset",
    "landlock_add_rule",
    "landlock_restrict_self",
    "sendmsg",
    "recvmsg",
    "getppid",
};
constexpr unsigned long kJobSetupPrctls[] = {
    PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP,  PR_CAP_AMBIENT,
    PR_SET_DUMPABLE,  PR_SET_SECUREBITS,   PR_GET_SECUREBITS};

// The job recipe's rules for these calls are replaced by unconditional ones: the zygote clones
// with namespace flags, and its allocations are not watched (libseccomp refuses an unconditional
// rule next to conditional ones for the same call).
bool widened(int nr) {
    return nr == SCMP_SYS(clone) || nr == SCMP_SYS(mmap) || nr == SCMP_SYS(mremap);
}

}  // namespace

Recipe nesting_recipe(const Recipe& jobs) {
    Recipe outer;
    outer.default_action = SCMP_ACT_TRACE(0);
    std::set<int> unconditional_nrs;
    for (const Recipe::Rule& rule : jobs.rules) {
        if (widened(rule.nr)) continue;
        outer.rules.push_back(rule);
        if (rule.args.empty() && rule.action == SCMP_ACT_ALLOW) unconditional_nrs.insert(rule.nr);
    }
    for (int nr : {SCMP_SYS(clone), SCMP_SYS(mmap), SCMP_SYS(mremap)})
        add_rule(outer, SCMP_ACT_ALLOW, nr);
    for (const char* name : kJobSetupCalls)
        if (int nr = resolve(name);
            nr != __NR_SCMP_ERROR && !unconditional_nrs.contains(nr) &&
            std::ranges::none_of(jobs.rules, [&](const Recipe::Rule& r) { return r.nr == nr; }))
            add_rule(outer, SCMP_ACT_ALLOW, nr);
    const bool prctl_unconditional = unconditional_nrs.contains(SCMP_SYS(prctl));
    if (!prctl_unconditional)
        for (unsigned long option : kJobSetupPrctls)
            add_rule(outer, SCMP_ACT_ALLOW, SCMP_SYS(prctl),
                     {SCMP_A0(SCMP_CMP_MASKED_EQ, kLow32, option)});
    if (!unconditional_nrs.contains(SCMP_SYS(ioctl)))
        add_rule(outer, SCMP_ACT_ALLOW, SCMP_SYS(ioctl),
                 {SCMP_A1(SCMP_CMP_MASKED_EQ, kLow32, SIOCSIFFLAGS)});
    return outer;
}

std::vector<sock_filter> compile(const Recipe& recipe) {
    SeccompCtx ctx = new_context(recipe.default_action);
    for (const Recipe::Rule& rule : recipe.rules) {
        std::vector<scmp_arg_cmp> args;
        for (const auto& [arg, op, a, b] : rule.args)
            args.push_back({static_cast<unsigned>(arg), static_cast<scmp_compare>(op), a, b});
        const int rc = seccomp_rule_add_array(ctx.get(), rule.action, rule.nr,
                                              static_cast<unsigned>(args.size()),
                                              args.empty() ? nullptr : args.data());
        if (rc < 0)
            throw SysError("seccomp_rule_add(" + syscall_name(AUDIT_ARCH_X86_64, rule.nr) + ")",
                           -rc);
    }
    return export_program(ctx.get());
}

std::string Recipe::fingerprint() const {
    // new_context()'s settings, then the rules.
    const scmp_version* version = seccomp_version();
    std::string text = "pysandbox seccomp recipe 1; libseccomp " + std::to_string(version->major) +
                       "." + std::to_string(version->minor) + "." + std::to_string(version->micro) +
                       "; arch " + std::to_string(seccomp_arch_native()) + "; default " +
                       (default_action == SCMP_ACT_NOTIFY ? std::string("notify")
                                                          : std::to_string(default_action)) +
                       "; bad arch kill; optimize 2\n";
    for (const Rule& rule : rules) {
        text += std::to_string(rule.action) + " " + std::to_string(rule.nr);
        for (const auto& [arg, op, a, b] : rule.args)
            text += " (" + std::to_string(arg) + " " + std::to_string(op) + " " +
                    std::to_string(a) + " " + std::to_string(b) + ")";
        text += "\n";
    }
    return text;
}

namespace {

// The 64-bit FNV-1a hash of the fingerprint names the file; the fingerprint inside decides.
std::filesystem::path prepared_file(const std::filesystem::path& dir,
                                    std::string_view fingerprint) {
    std::uint64_t hash = 0xcbf29ce484222325ULL;
    for (const char c : fingerprint) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 0x100000001b3ULL;
    }
    char name[32];
    std::snprintf(name, sizeof name, "%016llx.bpf", static_cast<unsigned long long>(hash));
    return dir / name;
}

constexpr std::size_t kMaxPreparedBytes = 1 << 20;

}  // namespace

void write_prepared(const std::filesystem::path& dir, const Recipe& recipe,
                    const std::vector<sock_filter>& program) {
    const std::string fingerprint = recipe.fingerprint();
    const std::filesystem::path file = prepared_file(dir, fingerprint);
    const std::filesystem::path partial = file.string() + ".partial";
    {
        std::ofstream out(partial, std::ios::binary | std::ios::trunc);
        out.write(fingerprint.data(), static_cast<std::streamsize>(fingerprint.size() + 1));
        out.write(reinterpret_cast<const char*>(program.data()),
                  static_cast<std::streamsize>(program.size() * sizeof(sock_filter)));
        if (!out.flush()) throw SysError("write(" + partial.string() + ")", errno);
    }
    std::filesystem::rename(partial, file);
}

std::optional<std::vector<sock_filter>> read_prepared(const std::filesystem::path& dir,
                                                      const Recipe& recipe) {
    const std::string fingerprint = recipe.fingerprint();
    const std::filesystem::path file = prepared_file(dir, fingerprint);
    HostFile prepared = read_host_file(file.string(), kMaxPreparedBytes, O_NOFOLLOW);
    if (prepared.problem != HostFile::Problem::none) return std::nullopt;
    const std::string& content = prepared.data;
    const std::size_t header = fingerprint.size() + 1;
    if (content.size() <= header || content.compare(0, fingerprint.size(), fingerprint) != 0 ||
        content[fingerprint.size()] != '\0' || (content.size() - header) % sizeof(sock_filter) != 0)
        return std::nullopt;
    std::vector<sock_filter> program((content.size() - header) / sizeof(sock_filter));
    if (program.size() > BPF_MAXINSNS) return std::nullopt;
    std::memcpy(program.data(), content.data() + header, content.size() - header);
    return program;
}

std::string syscall_name(std::uint32_t arch, int nr) {
    std::unique_ptr<char, decltype(&std::free)> name(seccomp_syscall_resolve_num_arch(arch, nr),
                                                     &std::free);
    return name ? std::string(name.get()) : "syscall " + std::to_string(nr);
}

int denial_errno(std::uint32_t arch, int nr) {
    if (nr > highest_known(arch)) return ENOSYS;
    const std::string name = syscall_name(arch, nr);
    if (name == "ioctl") return ENOTTY;
    if (name == "prctl") return EINVAL;
    if (name == "socket" || name == "socketpair") return EAFNOSUPPORT;
    if (std::ranges::find(kEnosysDenials, name) != std::end(kEnosysDenials)) return ENOSYS;
    return EPERM;
}

bool is_allocation_watch(std::uint32_t arch, int nr) {
    return arch == AUDIT_ARCH_X86_64 && (nr == SYS_mmap || nr == SYS_mremap);
}

}  // namespace pysandbox::seccomp
