#include "seccomp.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "errors.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox::seccomp {
namespace {

struct CtxRelease {
    void operator()(scmp_filter_ctx ctx) const noexcept { seccomp_release(ctx); }
};
using SeccompCtx = std::unique_ptr<void, CtxRelease>;

// The highest socket family any kernel may know; every value below it that is not allowed gets a
// rule, compared on the low 32 bits, since the kernel reads the argument as an int.
constexpr int kMaxSocketFamily = 64;
constexpr std::uint64_t kLow32 = 0xffffffffULL;

constexpr std::uint64_t kNamespaceFlags[] = {CLONE_NEWUSER,  CLONE_NEWNS,  CLONE_NEWPID,
                                             CLONE_NEWNET,   CLONE_NEWIPC, CLONE_NEWUTS,
                                             CLONE_NEWCGROUP};

void add_rule(scmp_filter_ctx ctx, std::uint32_t action, int nr, const char* what,
              std::initializer_list<scmp_arg_cmp> args = {}) {
    int rc = seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned>(args.size()),
                                    args.size() ? args.begin() : nullptr);
    if (rc < 0) throw SysError(std::string("seccomp_rule_add(") + what + ")", -rc);
}

int resolve(const char* name) {
    return seccomp_syscall_resolve_name(name);
}

void deny_process_creation(scmp_filter_ctx ctx, std::uint32_t deny) {
    for (const char* name : {"fork", "vfork"}) add_rule(ctx, deny, resolve(name), name);
    // clone() that does not make a thread makes a process.
    add_rule(ctx, deny, SCMP_SYS(clone), "clone without CLONE_THREAD",
             {SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0)});
}

void deny_sockets(scmp_filter_ctx ctx, std::uint32_t deny, bool inet) {
    for (int family = 0; family < kMaxSocketFamily; ++family) {
        bool allowed = family == AF_UNIX || (inet && (family == AF_INET || family == AF_INET6));
        if (!allowed)
            add_rule(ctx, deny, SCMP_SYS(socket), "socket family",
                     {SCMP_A0(SCMP_CMP_MASKED_EQ, kLow32, static_cast<scmp_datum_t>(family))});
    }
}

}  // namespace

const std::vector<Denial>& default_denials() {
    static const std::vector<Denial> kDenials = {
        {"mount", "mount API"},
        {"umount2", "mount API"},
        {"pivot_root", "mount API"},
        {"open_tree", "mount API"},
        {"move_mount", "mount API"},
        {"fsopen", "mount API"},
        {"fsconfig", "mount API"},
        {"fsmount", "mount API"},
        {"fspick", "mount API"},
        {"mount_setattr", "mount API"},
        {"chroot", "mount API"},
        {"unshare", "new namespaces"},
        {"setns", "new namespaces"},
        {"ptrace", "other processes' memory"},
        {"process_vm_readv", "other processes' memory"},
        {"process_vm_writev", "other processes' memory"},
        {"pidfd_getfd", "other processes' fds"},
        {"kexec_load", "kernel replacement"},
        {"kexec_file_load", "kernel replacement"},
        {"init_module", "kernel modules"},
        {"finit_module", "kernel modules"},
        {"delete_module", "kernel modules"},
        {"bpf", "kernel attack surface"},
        {"perf_event_open", "kernel attack surface"},
        {"userfaultfd", "kernel attack surface"},
        {"io_uring_setup", "kernel attack surface"},
        {"io_uring_enter", "kernel attack surface"},
        {"io_uring_register", "kernel attack surface"},
        {"keyctl", "kernel keyrings"},
        {"add_key", "kernel keyrings"},
        {"request_key", "kernel keyrings"},
        {"acct", "host administration"},
        {"swapon", "host administration"},
        {"swapoff", "host administration"},
        {"reboot", "host administration"},
        {"syslog", "kernel log"},
        {"quotactl", "host administration"},
        {"quotactl_fd", "host administration"},
        {"sethostname", "host administration"},
        {"setdomainname", "host administration"},
        {"open_by_handle_at", "file handles bypass the mount tree"},
        {"name_to_handle_at", "file handles bypass the mount tree"},
        {"clock_settime", "clock"},
        {"clock_adjtime", "clock"},
        {"settimeofday", "clock"},
        {"adjtimex", "clock"},
        {"lookup_dcookie", "kernel attack surface"},
        {"vhangup", "terminals"},
        {"uselib", "obsolete"},
        {"ustat", "obsolete"},
        {"sysfs", "obsolete"},
        {"_sysctl", "obsolete"},
        {"iopl", "hardware"},
        {"ioperm", "hardware"},
        {"fanotify_init", "host-wide file monitoring"},
        {"move_pages", "NUMA"},
        {"migrate_pages", "NUMA"},
        {"mbind", "NUMA"},
        {"set_mempolicy", "NUMA"},
        // Pages of a memfd that is never mapped count against no rlimit: without a memory
        // cgroup they would escape the memory limit.
        {"memfd_create", "memory outside the memory limit"},
        // SysV shared memory and message queues are not counted by rlimits either, and the
        // sandbox uid cannot lower their sysctls in its own IPC namespace.
        {"shmget", "memory outside the memory limit"},
        {"msgget", "memory outside the memory limit"},
    };
    return kDenials;
}

bool is_known_syscall(std::string_view name) {
    return resolve(std::string(name).c_str()) != __NR_SCMP_ERROR;
}

std::vector<sock_filter> compile(const Settings& settings, Sockets sockets) {
    SeccompCtx ctx(seccomp_init(SCMP_ACT_ALLOW));
    if (!ctx) throw SysError("seccomp_init", ENOMEM);
    // Only the native ABI: an i386 (int 0x80) or x32 call kills the process.
    if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        rc < 0)
        throw SysError("seccomp_attr_set(ACT_BADARCH)", -rc);

    const std::uint32_t deny = SCMP_ACT_NOTIFY;
    for (const auto& denial : default_denials()) {
        if (std::ranges::find(settings.allow, denial.name) != settings.allow.end()) continue;
        if (int nr = resolve(denial.name); nr != __NR_SCMP_ERROR)
            add_rule(ctx.get(), deny, nr, denial.name);
    }
    for (const auto& name : settings.deny)
        add_rule(ctx.get(), deny, resolve(name.c_str()), name.c_str());

    // personality() may only be queried: a changed persona (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE)
    // weakens the process.
    add_rule(ctx.get(), deny, SCMP_SYS(personality), "personality",
             {SCMP_A0(SCMP_CMP_NE, 0xffffffffULL, 0)});  // datum_b unused; clang wants it
    for (std::uint64_t flag : kNamespaceFlags)
        add_rule(ctx.get(), deny, SCMP_SYS(clone), "clone with CLONE_NEW*",
                 {SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)});
    if (!settings.allow_processes) deny_process_creation(ctx.get(), deny);
    // clone3 passes its flags in memory the filter cannot read: ENOSYS makes libc use clone().
    add_rule(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), "clone3");
    deny_sockets(ctx.get(), deny, sockets == Sockets::unix_and_inet);
    for (unsigned long request : {TIOCSTI, TIOCLINUX})
        add_rule(ctx.get(), deny, SCMP_SYS(ioctl), "ioctl(TIOCSTI/TIOCLINUX)",
                 {SCMP_A1(SCMP_CMP_MASKED_EQ, kLow32, request)});

    // libseccomp 2.5 exports only to a file descriptor.
    sys::UniqueFd memfd(check_sys(::memfd_create("seccomp-bpf", MFD_CLOEXEC), "memfd_create"));
    if (int rc = seccomp_export_bpf(ctx.get(), memfd.get()); rc < 0)
        throw SysError("seccomp_export_bpf", -rc);
    off_t size = check_sys(::lseek(memfd.get(), 0, SEEK_END), "lseek(seccomp-bpf)");
    std::vector<sock_filter> program(static_cast<std::size_t>(size) / sizeof(sock_filter));
    if (::pread(memfd.get(), program.data(), static_cast<std::size_t>(size), 0) != size)
        throw SysError("pread(seccomp-bpf)", errno);
    return program;
}

int load(const std::vector<sock_filter>& program) noexcept {
    sock_fprog prog{static_cast<unsigned short>(program.size()),
                    const_cast<sock_filter*>(program.data())};
    long fd =
        ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    return fd < 0 ? -errno : static_cast<int>(fd);
}

std::string syscall_name(std::uint32_t arch, int nr) {
    std::unique_ptr<char, decltype(&std::free)> name(seccomp_syscall_resolve_num_arch(arch, nr),
                                                     &std::free);
    return name ? std::string(name.get()) : "syscall " + std::to_string(nr);
}

}  // namespace pysandbox::seccomp
