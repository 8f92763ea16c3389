#include "plan/seccomp_table.hpp"

namespace pysandbox::seccomp {
namespace {

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

}  // namespace

std::span<const Allowed> allowlist_table() {
    return kTable;
}

std::span<const char* const> fallback_calls() {
    return kFallbacks;
}

}  // namespace pysandbox::seccomp
