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

#include "sys/errors.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox::seccomp {
namespace {

struct CtxRelease {
    void operator()(scmp_filter_ctx ctx) const noexcept { seccomp_release(ctx); }
};
using SeccompCtx = std::unique_ptr<void, CtxRelease>;

// The allowlist, measured: the system calls CPython 3.11's own test suite and numpy, pandas and
// matplotlib work made (strace, Debian 12), grouped, each with what needs it. Calls whose
// arguments are checked (ioctl, prctl, clone, socket, personality) are in compile() instead.
constexpr Allowed kTable[] = {
    // exec: the interpreter's own exec, and leaving
    {"execve", Level::minimal,
     "the interpreter's own exec: pysandbox loads the filter before execve"},
    // memory
    {"brk", Level::minimal, "malloc main heap"},
    {"madvise", Level::minimal,
     "glibc frees thread stacks/arena tails (MADV_DONTNEED); numpy MADV_HUGEPAGE"},
    {"mmap", Level::minimal,
     "ld.so maps libraries (PROT_READ|PROT_EXEC), malloc >128KiB, thread stacks, mmap module"},
    {"mprotect", Level::minimal, "ld.so RELRO, thread guard pages, malloc arenas"},
    {"mremap", Level::minimal, "realloc of mmap'd blocks (big lists, bytearrays, numpy)"},
    {"msync", Level::minimal, "mmap.flush()"},
    {"munmap", Level::minimal, "free/dlclose/thread stacks"},
    // files
    {"access", Level::minimal, "os.access, ld.so's /etc/ld.so.preload check, shutil.which"},
    {"chdir", Level::minimal, "os.chdir, regrtest's temp cwd"},
    {"chmod", Level::standard, "os.chmod, shutil.copy/copymode, tarfile/zipfile extraction"},
    {"chown", Level::standard, "tarfile/shutil.chown (only to the sandbox uid/gid)"},
    {"copy_file_range", Level::minimal, "os.copy_file_range; newer shutil uses it first"},
    {"creat", Level::processes,
     "legacy creat(): GNU tar 1.34 (Debian 12) creates archives with it (test_shutil's tar run "
     "failed without it)"},
    {"faccessat", Level::minimal, "fallback of faccessat2 (glibc), os.access(dir_fd=)"},
    {"faccessat2", Level::minimal,
     "glibc 2.36 faccessat() tries it first; EPERM would make os.access() silently False"},
    {"fadvise64", Level::minimal, "os.posix_fadvise; fontconfig (fc-list)"},
    {"fallocate", Level::minimal, "os.posix_fallocate (bounded by RLIMIT_FSIZE and the /tmp size)"},
    {"fchdir", Level::minimal, "os.fchdir"},
    {"fchmod", Level::standard, "os.chmod(fd)"},
    {"fchmodat", Level::standard, "os.chmod(dir_fd=, follow_symlinks=False)"},
    {"fchown", Level::standard,
     "os.fchown; sqlite3 fchowns new journals only when euid == 0 (seen as root, not as uid "
     "65534)"},
    {"fchownat", Level::standard, "os.chown(dir_fd=)"},
    {"fdatasync", Level::minimal, "sqlite3 commits (seen in the data-science workload)"},
    {"fgetxattr", Level::standard, "os.getxattr(fd)"},
    {"flistxattr", Level::standard, "os.listxattr(fd)"},
    {"flock", Level::minimal, "fcntl.flock"},
    {"fstat", Level::minimal,
     "legacy fstat: not used by glibc 2.36, harmless alias, other libcs/static binaries"},
    {"fstatfs", Level::minimal, "os.fstatvfs; fontconfig checks the cache's file system"},
    {"fsync", Level::minimal, "os.fsync, sqlite3"},
    {"ftruncate", Level::minimal, "file.truncate(), sqlite3, mmap resize"},
    {"getcwd", Level::minimal, "os.getcwd, sys.path[0], pathlib"},
    {"getdents64", Level::minimal, "os.listdir/scandir, importlib's path cache, glob"},
    {"getxattr", Level::standard, "shutil.copystat copies xattrs"},
    {"lchown", Level::standard, "os.lchown, tarfile"},
    {"lgetxattr", Level::standard, "shutil.copystat(follow_symlinks=False)"},
    {"link", Level::standard, "os.link"},
    {"linkat", Level::standard, "os.link(dir_fd=)"},
    {"listxattr", Level::standard, "shutil._copyxattr"},
    {"llistxattr", Level::standard, "shutil._copyxattr"},
    {"lseek", Level::minimal, "tell/seek; io checks seekability"},
    {"mkdir", Level::minimal, "os.mkdir, tempfile.mkdtemp"},
    {"mkdirat", Level::minimal, "os.mkdir(dir_fd=)"},
    {"mknodat", Level::standard,
     "os.mkfifo (glibc mkfifo/mknod = mknodat; devices need CAP_MKNOD)"},
    {"newfstatat", Level::minimal,
     "glibc 2.36 stat/fstat/lstat all use newfstatat on x86_64; imports, os.stat"},
    {"openat", Level::minimal, "every open(): glibc 2.36 routes open() through openat"},
    {"pread64", Level::minimal, "ld.so reads ELF headers; sqlite3; zipfile"},
    {"preadv", Level::minimal, "os.preadv"},
    {"preadv2", Level::minimal, "os.preadv(flags=); harmless variant"},
    {"pwrite64", Level::minimal, "sqlite3 page/journal writes"},
    {"pwritev", Level::minimal, "os.pwritev"},
    {"pwritev2", Level::minimal, "os.pwritev(flags=); harmless variant"},
    {"read", Level::minimal, "files, pipes, stdin"},
    {"readlink", Level::minimal, "/proc/self/exe at start-up, os.path.realpath"},
    {"readlinkat", Level::minimal, "os.readlink(dir_fd=), realpath"},
    {"readv", Level::minimal, "os.readv, glibc stdio paths"},
    {"rename", Level::minimal, "os.rename/replace (atomic writes)"},
    {"renameat", Level::minimal, "os.rename(src_dir_fd=)"},
    {"renameat2", Level::minimal, "glibc renameat2(); harmless variant of renameat"},
    {"rmdir", Level::minimal, "os.rmdir, shutil.rmtree, TemporaryDirectory"},
    {"sendfile", Level::minimal,
     "shutil.copyfile fast path (falls back on error, but a KILL default would kill)"},
    {"statfs", Level::minimal, "os.statvfs, shutil.disk_usage, glibc shm/sem_open checks"},
    {"statx", Level::minimal,
     "not used by glibc 2.36/CPython 3.11; Rust/Go-built extensions use it (harmless, like "
     "newfstatat)"},
    {"symlink", Level::standard, "os.symlink, pathlib"},
    {"symlinkat", Level::standard, "os.symlink(dir_fd=)"},
    {"truncate", Level::minimal, "os.truncate"},
    {"umask", Level::minimal, "os.umask"},
    {"unlink", Level::minimal, "os.remove, tempfile cleanup"},
    {"unlinkat", Level::minimal, "shutil.rmtree's fd-based walk"},
    {"utimensat", Level::minimal, "os.utime, shutil.copystat, tarfile/zipfile extraction"},
    {"write", Level::minimal, "stdout/stderr, files; pysandbox's audit channel fd 4"},
    {"writev", Level::minimal, "os.writev, glibc/ld.so messages"},
    // fd
    {"close", Level::minimal, "every fd"},
    {"close_range", Level::minimal, "os.closerange, subprocess close_fds (fallback on any error)"},
    {"dup", Level::minimal, "os.dup"},
    {"dup2", Level::minimal, "os.dup2; subprocess child set-up"},
    {"dup3", Level::minimal, "os.dup2(inheritable=False)"},
    {"epoll_create", Level::standard, "legacy epoll_create"},
    {"epoll_create1", Level::minimal,
     "`import selectors` (so `import subprocess`, asyncio, concurrent.futures) creates and closes "
     "an epoll at import to pick DefaultSelector"},
    {"epoll_ctl", Level::minimal, "epoll register/modify"},
    {"epoll_pwait", Level::minimal, "glibc epoll_pwait()"},
    {"epoll_wait", Level::minimal, "select.epoll.poll (CPython 3.11)"},
    {"eventfd2", Level::standard, "os.eventfd"},
    {"fcntl", Level::minimal,
     "F_GETFD/F_SETFD/F_GETFL/F_SETFL/F_DUPFD_CLOEXEC, sqlite3's F_SETLK locks, F_GETPIPE_SZ"},
    {"pipe2", Level::minimal, "os.pipe, self-pipe wake-ups"},
    {"poll", Level::minimal, "select.poll, subprocess.communicate, socket timeouts"},
    {"ppoll", Level::minimal, "glibc ppoll(); harmless variant of poll"},
    {"pselect6", Level::minimal, "select.select (glibc 2.36 select() = pselect6)"},
    {"select", Level::minimal, "legacy select; harmless"},
    // time
    {"alarm", Level::minimal, "signal.alarm (script time-outs)"},
    {"clock_getres", Level::minimal, "time.get_clock_info (vDSO normally)"},
    {"clock_gettime", Level::minimal,
     "vDSO for REALTIME/MONOTONIC; a real syscall for process/thread CPU clocks "
     "(time.process_time) or without a vDSO clock source"},
    {"clock_nanosleep", Level::minimal,
     "time.sleep (CLOCK_MONOTONIC, TIMER_ABSTIME), lock timeouts"},
    {"getitimer", Level::minimal, "signal.getitimer"},
    {"gettimeofday", Level::minimal, "vDSO; syscall fallback"},
    {"nanosleep", Level::minimal, "legacy nanosleep (other libraries)"},
    {"setitimer", Level::minimal, "signal.setitimer"},
    {"time", Level::minimal, "vDSO; syscall fallback"},
    {"times", Level::minimal, "os.times"},
    // threads
    {"futex", Level::minimal,
     "every lock, the GIL, condition variables, joins; FUTEX_WAKE/WAIT on shared semaphores"},
    {"gettid", Level::minimal, "threading.get_native_id, glibc"},
    {"rseq", Level::minimal, "glibc 2.35+ registers rseq per thread (failure tolerated)"},
    {"set_robust_list", Level::minimal, "glibc at start-up and per thread"},
    {"set_tid_address", Level::minimal, "glibc start-up"},
    // signals
    {"kill", Level::standard, "os.kill (confined to the PID namespace)"},
    {"pause", Level::standard, "signal.pause"},
    {"restart_syscall", Level::minimal, "kernel restart of an interrupted sleep"},
    {"rt_sigaction", Level::minimal, "signal.signal; CPython's start-up handlers; faulthandler"},
    {"rt_sigpending", Level::standard, "signal.sigpending"},
    {"rt_sigprocmask", Level::minimal,
     "glibc blocks signals around thread creation; signal.pthread_sigmask"},
    {"rt_sigreturn", Level::minimal, "return from any signal handler"},
    {"rt_sigsuspend", Level::standard, "sigsuspend"},
    {"rt_sigtimedwait", Level::standard, "signal.sigtimedwait/sigwaitinfo"},
    {"sigaltstack", Level::minimal,
     "faulthandler.enable() (regrtest, python -X faulthandler) - EPERM makes it raise"},
    {"tgkill", Level::minimal, "raise()/abort(), signal.pthread_kill, faulthandler"},
    // identity
    {"arch_prctl", Level::minimal,
     "ld.so sets the TLS base (ARCH_SET_FS); AMX permission requests"},
    {"getegid", Level::minimal, "start-up"},
    {"geteuid", Level::minimal, "start-up, os.access emulation"},
    {"getgid", Level::minimal, "start-up"},
    {"getgroups", Level::minimal, "os.getgroups"},
    {"getpgid", Level::minimal, "os.getpgid: a query, inside the PID namespace"},
    {"getpgrp", Level::minimal, "os.getpgrp: a query, inside the PID namespace"},
    {"getpid", Level::minimal, "os.getpid, random/tempfile fork checks, logging"},
    {"getppid", Level::minimal, "os.getppid"},
    {"getrandom", Level::minimal,
     "hash seed at start-up (GRND_NONBLOCK), os.urandom, random, secrets, OpenSSL"},
    {"getresgid", Level::minimal, "os.getresgid"},
    {"getresuid", Level::minimal, "os.getresuid"},
    {"getrusage", Level::minimal, "resource.getrusage"},
    {"getsid", Level::minimal, "os.getsid: a query, inside the PID namespace"},
    {"getuid", Level::minimal, "start-up (site), pwd, getpass"},
    {"prlimit64", Level::minimal,
     "glibc getrlimit/setrlimit (RLIMIT_STACK at start-up, RLIMIT_NOFILE, resource module)"},
    {"sysinfo", Level::minimal, "glibc sysconf(_SC_PHYS_PAGES) during CPython start-up (qsort)"},
    {"uname", Level::minimal, "platform, sysconfig, numpy/pandas/matplotlib imports"},
    // sched
    {"getcpu", Level::minimal, "vDSO; sched_getcpu falls back to it when rseq is unavailable"},
    {"getpriority", Level::standard, "os.getpriority"},
    {"sched_get_priority_max", Level::standard, "os.sched_get_priority_max"},
    {"sched_get_priority_min", Level::standard, "os.sched_get_priority_min"},
    {"sched_getaffinity", Level::minimal,
     "os.sched_getaffinity; native libraries size thread pools (seen at matplotlib import)"},
    {"sched_getparam", Level::standard, "os.sched_getparam"},
    {"sched_getscheduler", Level::standard, "os.sched_getscheduler"},
    {"sched_rr_get_interval", Level::standard, "os.sched_rr_get_interval"},
    {"sched_yield", Level::minimal, "spin-wait back-off (OpenBLAS/OpenMP, glibc)"},
    {"setpriority", Level::standard,
     "os.nice/setpriority (can only lower priority without CAP_SYS_NICE)"},
    // sockets
    {"accept", Level::standard, "legacy accept"},
    {"accept4", Level::standard, "socket.accept"},
    {"bind", Level::standard, "AF_UNIX listeners"},
    {"connect", Level::standard, "AF_UNIX clients (libuuid's uuidd, multiprocessing forkserver)"},
    {"getpeername", Level::standard, "socket.getpeername"},
    {"getsockname", Level::standard, "asyncio transports"},
    {"getsockopt", Level::standard, "SO_ERROR/SO_TYPE (asyncio, socket(fileno=))"},
    {"listen", Level::standard, "AF_UNIX listeners"},
    {"recvfrom", Level::standard, "socket.recv (glibc recv = recvfrom); asyncio self-pipe"},
    {"recvmsg", Level::standard, "multiprocessing fd passing (SCM_RIGHTS)"},
    {"sendmsg", Level::minimal,
     "pysandbox sends the seccomp listener over the report socket after loading the filter"},
    {"sendto", Level::standard, "socket.send (glibc send = sendto); asyncio self-pipe"},
    {"setsockopt", Level::standard, "SO_REUSEADDR etc."},
    {"shutdown", Level::standard, "socket.shutdown"},
    {"socketpair", Level::standard, "asyncio's self-pipe, multiprocessing.Pipe(duplex=True)"},
    // process
    {"exit", Level::minimal, "thread exit"},
    {"exit_group", Level::minimal, "process exit"},
    {"pidfd_open", Level::processes, "os.pidfd_open, asyncio PidfdChildWatcher"},
    {"pidfd_send_signal", Level::processes, "signal.pidfd_send_signal"},
    {"setpgid", Level::processes, "subprocess process_group=, os.setpgid"},
    {"setsid", Level::processes, "subprocess start_new_session"},
    {"fork", Level::processes, "fork() itself: glibc forks with clone, other runtimes with fork"},
    {"vfork", Level::processes,
     "subprocess (_posixsubprocess vfork path): matplotlib's fc-list, pandas' `uname -p` via "
     "platform.uname()[4]"},
    {"wait4", Level::minimal, "os.waitpid; regrtest's reap_children (ECHILD without children)"},
    {"waitid", Level::standard, "os.waitid"},
};

// Newer calls that libc (glibc 2.36..2.39) tries first and falls back from only on ENOSYS: the
// filter answers ENOSYS itself, so the fallback happens as on an older kernel and the result
// does not list a denial for every thread started (clone3) or every os.access().
constexpr const char* kFallbacks[] = {
    "clone3",        // pthread_create, posix_spawn: flags in memory, which no filter can read
    "openat2",       // not used by CPython; libraries probe it
    "epoll_pwait2",  // likewise
    "futex_waitv",      "futex_wake", "futex_wait", "futex_requeue",  // newer futex API
    "fchmodat2",  // glibc 2.39 fchmodat() with flags
    "map_shadow_stack", "cachestat",
};

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
    for (const Allowed& row : kTable)
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
    for (const char* name : kFallbacks) {
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

std::span<const Allowed> allowlist_table() {
    return kTable;
}

std::span<const char* const> fallback_calls() {
    return kFallbacks;
}

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
    sys::UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<std::size_t>(st.st_size) > kMaxPreparedBytes)
        return std::nullopt;
    std::string content(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t done = 0;
    while (done < content.size()) {
        const ssize_t n = ::read(fd.get(), content.data() + done, content.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return std::nullopt;
        done += static_cast<std::size_t>(n);
    }
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
