#include "inside/child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <span>
#include <utility>

#include "inside/caps.hpp"
#include "inside/init.hpp"
#include "inside/landlock.hpp"
#include "inside/limits.hpp"
#include "inside/mounts.hpp"
#include "inside/net.hpp"
#include "sys/fault_injection.hpp"
#include "sys/unique_fd.hpp"
#include "wire/exit_status.hpp"

namespace pysandbox {
namespace {

// After the id switch: changing the effective uid (root's sandboxes go from 0 to 65534) clears
// the parent-death signal, so it is armed only once the ids are final. A supervisor that died
// before that has closed its end of the report socket.
int step_die_with_supervisor(ChildContext& ctx) noexcept {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
        return step_fail(ctx, "prctl(PR_SET_PDEATHSIG, SIGKILL)");
    pollfd peer{ctx.fds.report_write, POLLRDHUP, 0};
    if (::poll(&peer, 1, 0) > 0 && (peer.revents & (POLLRDHUP | POLLHUP))) {
        errno = ECHILD;
        return step_fail(ctx, "poll(report socket): the supervisor is gone");
    }
    return 0;
}

// A forked job's parent is its zygote, not the supervisor: the job dies with it. A zygote that
// died before the prctl would not signal; its pidfd says whether it lives.
int step_die_with_zygote(ChildContext& ctx) noexcept {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
        return step_fail(ctx, "prctl(PR_SET_PDEATHSIG, SIGKILL)");
    pollfd zygote{ctx.zygote_pidfd, POLLIN, 0};
    const int gone = ::poll(&zygote, 1, 0);
    ::close(std::exchange(ctx.zygote_pidfd, -1));
    if (gone != 0) {
        errno = gone < 0 ? errno : ECHILD;
        return step_fail(ctx, "poll(zygote pidfd): the zygote is gone");
    }
    return 0;
}

// First of all: the child shares the supervisor's descriptors, its ends of the pipes included.
// Holding the release pipe's write end would make the child wait forever for a supervisor that
// died before releasing it (no EOF), and holding the report socket's other end would hide the
// supervisor's death from step_die_with_supervisor (no hangup). Only stdio, the child's own ends
// and the host files the plan opened for it (inputs, the workdir) stay; step_close_fds closes the
// rest once they are in place.
int step_keep_only_own_fds(ChildContext& ctx) noexcept {
    const ChildFds& fds = ctx.fds;
    int own[8 + kMaxInputs];
    std::size_t count = 0;
    for (int fd : {fds.release_read, fds.report_write, fds.stdin_read, fds.stdout_write,
                   fds.stderr_write, fds.policy_write, fds.control})
        own[count++] = fd;
    if (ctx.plan.host_workdir) own[count++] = ctx.plan.host_workdir->fd.get();
    for (const InputFile& input : ctx.plan.inputs) own[count++] = input.fd.get();
    own[count++] = ctx.font_list_fd;  // a forked job's: its zygote's copy
    own[count++] = ctx.zygote_pidfd;
    std::sort(own, own + count);
    unsigned first = STDERR_FILENO + 1;
    for (int fd : std::span(own, count)) {
        if (fd < 0) continue;  // no policy or control channel, not forked
        if (static_cast<unsigned>(fd) > first && ::close_range(first, fd - 1, 0) != 0)
            return step_fail(ctx, "close_range(%u, %d)", first, fd - 1);
        first = std::max(first, static_cast<unsigned>(fd) + 1);
    }
    if (::close_range(first, ~0U, 0) != 0) return step_fail(ctx, "close_range(%u, ~0)", first);
    return 0;
}

// The child is a copy of pysandbox: its argv and environment are the caller's command line (host
// paths of the inputs, the workdir, the profile) and environment, and the script can read its
// init's /proc/1/cmdline. Both are blanked in place (/proc/self/stat fields 48-51 say where);
// the command line keeps only a name and the script's own arguments, which it has anyway.
int step_blank_command_line(ChildContext& ctx) noexcept {
    char stat[4096];
    sys::UniqueFd fd(::open("/proc/self/stat", O_RDONLY | O_CLOEXEC));
    const ssize_t n = fd ? ::read(fd.get(), stat, sizeof stat - 1) : -1;
    if (n <= 0) return step_fail(ctx, "read(/proc/self/stat)");
    stat[n] = '\0';
    const char* field = std::strrchr(stat, ')');  // the command name may hold spaces
    unsigned long long bounds[4] = {};
    for (int number = 2; field != nullptr && number < 52; ++number) {
        field = std::strchr(field + 1, ' ');
        if (field != nullptr && number >= 47 && number <= 50)
            bounds[number - 47] = std::strtoull(field + 1, nullptr, 10);
    }
    if (bounds[1] <= bounds[0] || bounds[3] < bounds[2]) {
        errno = EINVAL;
        return step_fail(ctx, "parse(/proc/self/stat): arg_start..env_end");
    }
    char* at = reinterpret_cast<char*>(bounds[0]);
    char* const end = reinterpret_cast<char*>(bounds[1]);
    std::memset(at, 0, static_cast<std::size_t>(end - at));
    const auto& argv = ctx.plan.argv;
    for (std::size_t i = ctx.plan.script_args - 1; i < argv.size(); ++i) {
        const char* word = i + 1 == ctx.plan.script_args ? "pysandbox-init" : argv[i].c_str();
        const std::size_t length = std::strlen(word) + 1;
        if (length > static_cast<std::size_t>(end - at)) break;
        std::memcpy(at, word, length);
        at += length;
    }
    std::memset(reinterpret_cast<char*>(bounds[2]), 0, bounds[3] - bounds[2]);
    return 0;
}

// Blocks until the supervisor has written uid_map/gid_map. EOF instead of the go byte means the
// supervisor died first.
int step_wait_for_id_maps(ChildContext& ctx) noexcept {
    char go = 0;
    ssize_t n;
    while ((n = ::read(ctx.fds.release_read, &go, 1)) < 0 && errno == EINTR) {
    }
    ::close(ctx.fds.release_read);
    if (n != 1) {
        errno = n < 0 ? errno : ECHILD;
        return step_fail(ctx, "read(release pipe): supervisor gone before the id maps");
    }
    return 0;
}

int step_new_session(ChildContext& ctx) noexcept {
    if (::setsid() < 0) return step_fail(ctx, "setsid()");
    return 0;
}

// Only stdin, stdout, stderr (the supervisor's pipes), the report socket and the two channels
// stay open: whatever the caller leaked into pysandbox does not reach the script. The policy
// channel (a profile with a [policy]: the audit hook writes to it) and the cell driver's channel
// are the only ones the interpreter inherits.
int step_close_fds(ChildContext& ctx) noexcept {
    const ChildFds& fds = ctx.fds;
    if (::dup2(fds.stdin_read, STDIN_FILENO) < 0 || ::dup2(fds.stdout_write, STDOUT_FILENO) < 0 ||
        ::dup2(fds.stderr_write, STDERR_FILENO) < 0)
        return step_fail(ctx, "dup2(stdio pipes -> 0, 1, 2)");
    // Out of the way first: any of them may sit where another one goes.
    constexpr int kAbove = kControlFd + 1;
    const int report = ::fcntl(fds.report_write, F_DUPFD_CLOEXEC, kAbove);
    const int policy =
        fds.policy_write >= 0 ? ::fcntl(fds.policy_write, F_DUPFD_CLOEXEC, kAbove) : -1;
    const int control = fds.control >= 0 ? ::fcntl(fds.control, F_DUPFD_CLOEXEC, kAbove) : -1;
    if (report < 0 || (fds.policy_write >= 0 && policy < 0) || (fds.control >= 0 && control < 0))
        return step_fail(ctx, "fcntl(F_DUPFD_CLOEXEC, %d)", kAbove);
    if (::dup3(report, kReportFd, O_CLOEXEC) < 0)
        return step_fail(ctx, "dup3(report socket -> %d)", kReportFd);
    if (policy >= 0 && ::dup2(policy, kPolicyFd) < 0)
        return step_fail(ctx, "dup2(policy channel -> %d)", kPolicyFd);
    if (control >= 0 && ::dup2(control, kControlFd) < 0)
        return step_fail(ctx, "dup2(control channel -> %d)", kControlFd);
    // A channel the plan does not have leaves its number closed, whatever sat there (in a forked
    // sandbox, a descriptor of the zygote's interpreter).
    if (policy < 0) ::close(kPolicyFd);
    if (control < 0) ::close(kControlFd);
    if (::close_range(kAbove, ~0U, 0) != 0) return step_fail(ctx, "close_range(%d, ~0)", kAbove);
    ctx.report_fd = kReportFd;
    return 0;
}

constexpr unsigned kCloned = static_cast<unsigned>(Birth::cloned);
constexpr unsigned kForked = static_cast<unsigned>(Birth::forked);

// The order matters: every step below a line needs what the steps above it set up. A job a
// zygote forks (Birth::forked) runs every step but those marked kCloned: its zygote's root, /dev
// and files are already in place, and its ids are its zygote's.
constexpr Step kSteps[] = {
    {"close the supervisor's ends", step_keep_only_own_fds},
    {"blank the caller's command line", step_blank_command_line, kCloned},
    // Before the id maps: the zygote's death would leave the job waiting for them.
    {"die with the zygote", step_die_with_zygote, kForked},
    {"wait for the id maps", step_wait_for_id_maps},
    // Everything after runs as the sandbox uid, still with every capability in the new namespace.
    {"switch to the sandbox ids", caps::step_switch_ids, kCloned},
    {"die with the supervisor", step_die_with_supervisor, kCloned},
    // A job's filter refuses keyctl (seccomp_test.cpp), and so does its zygote's: it cannot reach
    // the zygote's keyring.
    {"join a fresh session keyring", caps::step_join_session_keyring, kCloned},
    {"make mounts private", mounts::step_make_mounts_private},
    // Before the staging root covers /tmp, where build trees and workdirs often are.
    {"open the prepared font list", mounts::step_open_font_list, kCloned},
    {"open the workdir", mounts::step_open_workdir, kCloned},
    {"open the package environment", mounts::step_open_packages, kCloned},
    {"mount the staging root", mounts::step_mount_staging_root, kCloned},
    {"bind host paths read-only", mounts::step_bind_host_paths, kCloned},
    {"write synthetic files", mounts::step_write_files, kCloned},
    // After the script's directory exists: the environment is bound into it.
    {"bind the package environment", mounts::step_bind_packages, kCloned},
    {"populate /dev", mounts::step_populate_dev, kCloned},
    {"mount gVisor's state directory", mounts::step_mount_gvisor_state, kCloned},
    // Before the workdir is handed over: that report wakes the supervisor, which then sees the
    // socket listening and watches it.
    {"listen for the audit hook and the driver (gVisor)", mounts::step_listen_channels, kCloned},
    {"mount /dev/shm", mounts::step_mount_shm},
    {"mount /tmp", mounts::step_mount_tmp},
    {"copy matplotlib's font list", mounts::step_copy_font_list},
    // Inputs and the workdir's layers go into /tmp/work, so after it exists; the directory is
    // sent once they are in place.
    {"copy the input files", mounts::step_copy_inputs},
    {"mount the workdir overlay", mounts::step_mount_workdir_overlay},
    {"hand /tmp/work to the supervisor", mounts::step_send_work_dir},
    {"mount /proc", mounts::step_mount_proc},
    // In the /proc just mounted, before /proc/sys is made read-only.
    {"bound the host user's kernel counts", limits::step_bound_user_counts},
    {"mask /proc", mounts::step_mask_proc},
    {"pivot into the new root", mounts::step_pivot_root, kCloned},
    {"seal the root read-only", mounts::step_seal_root, kCloned},
    {"enter the work directory", mounts::step_enter_workdir},
    {"set the hostname", net::step_set_hostname},
    {"configure the network", net::step_configure_network},
    // After lo is up (it binds 127.0.0.1), before the fds are closed (it uses the report socket).
    {"open the proxy port", net::step_open_proxy_port},
    {"start a new session", step_new_session},
    {"close inherited fds", step_close_fds},
    // The script's rlimits are set in its own process, just before seccomp (init.cpp).
    {"pin to the allowed CPUs", limits::step_set_affinity},
    // Landlock needs the final paths (after pivot_root), the proxy's port bound (it refuses binds)
    // and, without no_new_privs, CAP_SYS_ADMIN.
    {"restrict access (Landlock)", landlock::step_restrict_access},
    // Privileges go last: every step above needs CAP_SYS_ADMIN in the namespace.
    {"set no_new_privs", caps::step_set_no_new_privs},
    {"drop capabilities", caps::step_drop_capabilities},
};

constexpr int kStepCount = static_cast<int>(std::size(kSteps));

}  // namespace

void fail_step(const ChildContext& ctx, ReportKind kind, int index, int error) noexcept {
    Report report{};
    report.kind = kind;
    report.step = index;
    report.error = error;
    std::memcpy(report.detail, ctx.detail, sizeof report.detail);
    while (::write(ctx.report_fd, &report, sizeof report) < 0 && errno == EINTR) {
    }
    if (kind != ReportKind::exec_failed) ::_exit(exit_codes::kSandboxError);
    ::_exit(error == ENOENT || error == ENOTDIR ? exit_codes::kNotFound
                                                : exit_codes::kNotExecutable);
}

int step_fail(ChildContext& ctx, const char* format, ...) noexcept {
    const int saved = errno;
    va_list args;
    va_start(args, format);
    std::vsnprintf(ctx.detail, sizeof ctx.detail, format, args);
    va_end(args);
    return -(saved != 0 ? saved : EINVAL);
}

const char* child_step_name(int index) noexcept {
    if (index >= 0 && index < kStepCount) return kSteps[index].name;
    if (const char* name = init::interpreter_step_name(index - kStepCount)) return name;
    return "start the sandbox";
}

unsigned child_step_births(int index) noexcept {
    return index >= 0 && index < kStepCount ? kSteps[index].births : 0;
}

namespace {

// A test build may make one step fail with EPERM instead of running (sys/fault_injection.hpp);
// in every other build `eperm_step` is null.
int run_step(ChildContext& ctx, const Step& step) noexcept {
    const char* faked = faults::injected().eperm_step;
    if (faked != nullptr && std::strcmp(faked, step.name) == 0) {
        errno = EPERM;
        return step_fail(ctx, "EPERM injected by PYSANDBOX_FAKE_EPERM_STEP");
    }
    return step.run(ctx);
}

void run_steps(ChildContext& ctx) noexcept {
    const unsigned birth = static_cast<unsigned>(ctx.birth);
    for (int i = 0; i < kStepCount; ++i) {
        if ((kSteps[i].births & birth) == 0) continue;
        errno = 0;
        if (int rc = run_step(ctx, kSteps[i]); rc != 0)
            fail_step(ctx, ReportKind::setup_failed, i, -rc);
    }
}

}  // namespace

void run_child(const Plan& plan, const ChildFds& fds) noexcept {
    ChildContext ctx{plan, fds, fds.report_write};
    run_steps(ctx);
    init::run_init(ctx, kStepCount);
}

void run_forked_child(const Plan& plan, const ChildFds& fds, int font_list_fd,
                      int zygote_pidfd) noexcept {
    ChildContext ctx{plan, fds, fds.report_write, Birth::forked};
    ctx.font_list_fd = font_list_fd;
    ctx.zygote_pidfd = zygote_pidfd;
    run_steps(ctx);
    init::start_interpreter(ctx, kStepCount);
}

}  // namespace pysandbox
