#include "inside/mounts.hpp"

#include <fcntl.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <utility>

#include "sys/records.hpp"
#include "sys/unique_fd.hpp"
#include "wire/report.hpp"
#include "wire/sandbox_paths.hpp"

namespace pysandbox::mounts {

const char* staging_root(const ChildContext& ctx) noexcept {
    return ctx.birth == Birth::cloned ? kStagingRoot : "";
}

namespace {

// A path beneath the root being built, without allocating.
struct StagedPath {
    char text[PATH_MAX];
    StagedPath(const ChildContext& ctx, const char* inside) noexcept {
        std::snprintf(text, sizeof text, "%s%s", staging_root(ctx), inside);
    }
    StagedPath(const ChildContext& ctx, const char* inside_dir, const char* name) noexcept {
        std::snprintf(text, sizeof text, "%s%s/%s", staging_root(ctx), inside_dir, name);
    }
    const char* c_str() const noexcept { return text; }
};

int set_attr(const char* path, unsigned int flags, std::uint64_t attr_set) noexcept {
    mount_attr attr{};
    attr.attr_set = attr_set;
    return static_cast<int>(
        ::syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &attr, sizeof attr));
}

// mkdir -p; existing directories are fine.
int make_dirs(const char* path, mode_t mode) noexcept {
    char buffer[PATH_MAX];
    std::snprintf(buffer, sizeof buffer, "%s", path);
    for (char* p = buffer + 1; *p != '\0'; ++p) {
        if (*p != '/') continue;
        *p = '\0';
        if (::mkdir(buffer, mode) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (::mkdir(buffer, mode) != 0 && errno != EEXIST) return -1;
    return 0;
}

int make_parent_dirs(const char* path) noexcept {
    char parent[PATH_MAX];
    std::snprintf(parent, sizeof parent, "%s", path);
    if (char* slash = std::strrchr(parent, '/'); slash != nullptr && slash != parent) *slash = '\0';
    return make_dirs(parent, 0755);
}

// An empty file to bind a file over.
int make_file(const char* path) noexcept {
    if (make_parent_dirs(path) != 0) return -1;
    sys::UniqueFd fd(::open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444));
    return fd ? 0 : -1;
}

int write_file(const char* path, const std::string& content, mode_t mode) noexcept {
    if (make_parent_dirs(path) != 0) return -1;
    sys::UniqueFd fd(::open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
    if (!fd) return -1;
    std::size_t done = 0;
    while (done < content.size()) {
        ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        done += static_cast<std::size_t>(n);
    }
    return ::fchmod(fd.get(), mode);  // the umask must not decide the script's mode
}

int bind_readonly(ChildContext& ctx, const char* source, const char* target,
                  std::uint64_t attrs) noexcept {
    if (::mount(source, target, nullptr, MS_BIND | MS_REC, nullptr) != 0)
        return step_fail(ctx, "mount(%s -> %s, MS_BIND|MS_REC)", source, target);
    // Recursive, so mounts beneath the source (a separate /usr/local, say) are read-only too;
    // flags the source mount already has (noexec, locked by the kernel) are kept.
    if (set_attr(target, AT_RECURSIVE, attrs) != 0)
        return step_fail(ctx, "mount_setattr(%s, AT_RECURSIVE, 0x%llx)", target,
                         static_cast<unsigned long long>(attrs));
    return 0;
}

constexpr std::uint64_t kReadOnly = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;

// Copies the whole of `source` (read from offset 0, so the descriptor's own offset, shared with
// the supervisor, is left alone) into `target`.
int copy_contents(int source, int target) noexcept {
    off_t offset = 0;
    for (;;) {
        const ssize_t n = ::sendfile(target, source, &offset, 1 << 20);
        if (n == 0) return 0;
        if (n < 0 && errno != EINTR) return -1;
    }
}

}  // namespace

int step_make_mounts_private(ChildContext& ctx) noexcept {
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        return step_fail(ctx, "mount(/, MS_REC|MS_PRIVATE)");
    return 0;
}

int step_open_font_list(ChildContext& ctx) noexcept {
    const auto& list = ctx.plan.font_list;
    if (!list) return 0;
    ctx.font_list_fd = ::open(list->source.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (ctx.font_list_fd < 0) return step_fail(ctx, "open(%s, O_RDONLY)", list->source.c_str());
    return 0;
}

// overlayfs takes its layers only from the mounter's own mount namespace: the directory the plan
// opened (in the supervisor's) is opened again here, and must be the same one.
int step_open_workdir(ChildContext& ctx) noexcept {
    const auto& host = ctx.plan.host_workdir;
    if (!host) return 0;
    ctx.workdir_fd = ::open(host->path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ctx.workdir_fd < 0) return step_fail(ctx, "open(%s, O_PATH)", host->path.c_str());
    struct stat planned {
    }, now{};
    if (::fstat(host->fd.get(), &planned) != 0 || ::fstat(ctx.workdir_fd, &now) != 0 ||
        planned.st_dev != now.st_dev || planned.st_ino != now.st_ino) {
        errno = ESTALE;
        return step_fail(ctx, "open(%s): not the directory the plan opened", host->path.c_str());
    }
    return 0;
}

int step_open_packages(ChildContext& ctx) noexcept {
    if (ctx.plan.packages_dir.empty()) return 0;
    ctx.packages_fd =
        ::open(ctx.plan.packages_dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ctx.packages_fd < 0)
        return step_fail(ctx, "open(%s, O_PATH)", ctx.plan.packages_dir.c_str());
    return 0;
}

int step_bind_packages(ChildContext& ctx) noexcept {
    if (ctx.packages_fd < 0) return 0;
    char source[64];
    std::snprintf(source, sizeof source, "/proc/self/fd/%d", ctx.packages_fd);
    StagedPath target(ctx, kPackagesDir.data());  // a literal: NUL-terminated
    if (make_dirs(target.c_str(), 0755) != 0) return step_fail(ctx, "mkdir(%s)", target.c_str());
    const int rc = bind_readonly(ctx, source, target.c_str(), kReadOnly);
    ::close(ctx.packages_fd);
    ctx.packages_fd = -1;
    return rc;
}

int step_mount_staging_root(ChildContext& ctx) noexcept {
    // Under gVisor, runsc's gofer remounts the root read-only in a user namespace of its own,
    // where this mount's flags are locked, and it names no flag but read-only: nosuid and nodev
    // here would make that remount fail. Nothing on this tmpfs is a device or set-uid (the plan's
    // files are 0444 at most, and no device can be made in a user namespace); what is bound onto
    // it keeps its own flags.
    const unsigned long flags = ctx.plan.gvisor ? 0 : MS_NOSUID | MS_NODEV;
    if (::mount("sandbox-root", kStagingRoot, "tmpfs", flags, "mode=0755,size=64m") != 0)
        return step_fail(ctx, "mount(tmpfs -> %s)", kStagingRoot);
    return 0;
}

int step_bind_host_paths(ChildContext& ctx) noexcept {
    for (const auto& bind : ctx.plan.ro_binds) {
        StagedPath target(ctx, bind.source.c_str());
        int made = bind.is_directory ? make_dirs(target.c_str(), 0755) : make_file(target.c_str());
        if (made != 0) return step_fail(ctx, "mkdir/creat(%s)", target.c_str());
        if (int rc = bind_readonly(ctx, bind.source.c_str(), target.c_str(), kReadOnly); rc != 0)
            return rc;
    }
    for (const auto& link : ctx.plan.symlinks) {
        StagedPath path(ctx, link.path.c_str());
        if (make_parent_dirs(path.c_str()) != 0 ||
            ::symlink(link.target.c_str(), path.c_str()) != 0)
            return step_fail(ctx, "symlink(%s -> %s)", path.c_str(), link.target.c_str());
    }
    return 0;
}

int step_write_files(ChildContext& ctx) noexcept {
    for (const auto& file : ctx.plan.files) {
        StagedPath path(ctx, file.path.c_str());
        if (write_file(path.c_str(), file.content, file.mode) != 0)
            return step_fail(ctx, "write(%s)", path.c_str());
    }
    return 0;
}

int step_populate_dev(ChildContext& ctx) noexcept {
    for (const auto& device : ctx.plan.devices) {
        StagedPath target(ctx, device.c_str());
        if (make_file(target.c_str()) != 0) return step_fail(ctx, "creat(%s)", target.c_str());
        // Device nodes cannot be created in a user namespace; binds of the host's nodes can be
        // opened because their mount is not nodev.
        if (int rc = bind_readonly(ctx, device.c_str(), target.c_str(),
                                   MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
            rc != 0)
            return rc;
    }
    static constexpr const char* kLinks[][2] = {{"/dev/fd", "/proc/self/fd"},
                                                {"/dev/stdin", "/proc/self/fd/0"},
                                                {"/dev/stdout", "/proc/self/fd/1"},
                                                {"/dev/stderr", "/proc/self/fd/2"}};
    for (const auto& [inside, target] : kLinks) {
        StagedPath path(ctx, inside);
        if (::symlink(target, path.c_str()) != 0)
            return step_fail(ctx, "symlink(%s -> %s)", path.c_str(), target);
    }
    return 0;
}

// Under gVisor, runsc's state (plan/gvisor.hpp): writable by runsc, in the read-only root, and
// covered inside the container.
int step_mount_gvisor_state(ChildContext& ctx) noexcept {
    if (!ctx.plan.gvisor) return 0;
    StagedPath state(ctx, kGvisorDir.data(), "state");  // a literal: NUL-terminated
    if (make_dirs(state.c_str(), 0755) != 0) return step_fail(ctx, "mkdir(%s)", state.c_str());
    if (::mount("sandbox-gvisor", state.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                ctx.plan.gvisor->state_mount_options.c_str()) != 0)
        return step_fail(ctx, "mount(tmpfs -> %s, %s)", state.c_str(),
                         ctx.plan.gvisor->state_mount_options.c_str());
    return 0;
}

namespace {

// Binds `fd` (an unbound socket) at `inside`, listens on it, and closes this copy.
int listen_at(ChildContext& ctx, int& fd, std::string_view inside) noexcept {
    StagedPath path(ctx, inside.data());  // kGvisor*Socket: literals, NUL-terminated
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (std::strlen(path.c_str()) >= sizeof address.sun_path) {
        errno = ENAMETOOLONG;
        return step_fail(ctx, "bind(%s)", path.c_str());
    }
    std::strcpy(address.sun_path, path.c_str());
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
        return step_fail(ctx, "bind(%s)", path.c_str());
    // Backlog 0: the first connection (the hook's, the driver's) waits alone; a second one
    // waits until the supervisor took the first and closed the listener, and is then refused.
    if (::listen(fd, 0) != 0) return step_fail(ctx, "listen(%s)", path.c_str());
    ::close(std::exchange(fd, -1));
    return 0;
}

}  // namespace

int step_listen_channels(ChildContext& ctx) noexcept {
    if (!ctx.plan.gvisor || (ctx.fds.policy_write < 0 && ctx.fds.control < 0)) return 0;
    StagedPath dir(ctx, kGvisorChannelDir.data());  // a literal: NUL-terminated
    if (make_dirs(dir.c_str(), 0755) != 0) return step_fail(ctx, "mkdir(%s)", dir.c_str());
    if (ctx.fds.policy_write >= 0)
        if (int rc = listen_at(ctx, ctx.fds.policy_write, kGvisorPolicySocket); rc != 0) return rc;
    if (ctx.fds.control >= 0)
        if (int rc = listen_at(ctx, ctx.fds.control, kGvisorControlSocket); rc != 0) return rc;
    return 0;
}

// POSIX shared memory, where processes are allowed: a tmpfs of the sandbox's own (a forked job's
// covers its zygote's).
int step_mount_shm(ChildContext& ctx) noexcept {
    if (ctx.plan.shm_mount_options.empty()) return 0;
    StagedPath shm(ctx, "/dev/shm");
    if (::mkdir(shm.c_str(), 0755) != 0 && errno != EEXIST)
        return step_fail(ctx, "mkdir(%s)", shm.c_str());
    if (::mount("sandbox-shm", shm.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                ctx.plan.shm_mount_options.c_str()) != 0)
        return step_fail(ctx, "mount(tmpfs -> %s, %s)", shm.c_str(),
                         ctx.plan.shm_mount_options.c_str());
    return 0;
}

int step_mount_tmp(ChildContext& ctx) noexcept {
    StagedPath tmp(ctx, "/tmp");
    if (make_dirs(tmp.c_str(), 0755) != 0) return step_fail(ctx, "mkdir(%s)", tmp.c_str());
    if (::mount("sandbox-tmp", tmp.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                ctx.plan.tmp_mount_options.c_str()) != 0)
        return step_fail(ctx, "mount(tmpfs -> %s, %s)", tmp.c_str(),
                         ctx.plan.tmp_mount_options.c_str());
    StagedPath work(ctx, ctx.plan.workdir.c_str());
    if (make_dirs(work.c_str(), 0755) != 0) return step_fail(ctx, "mkdir(%s)", work.c_str());
    return 0;
}

// A copy owned by the run: matplotlib rewrites it when it finds the list stale (a font gone since
// the build), the script may change it, and both end with the run's /tmp.
int step_copy_font_list(ChildContext& ctx) noexcept {
    const auto& list = ctx.plan.font_list;
    if (!list) return 0;
    sys::UniqueFd source(std::exchange(ctx.font_list_fd, -1));
    StagedPath target(ctx, list->target.c_str());
    if (make_parent_dirs(target.c_str()) != 0)
        return step_fail(ctx, "mkdir(parents of %s)", target.c_str());
    sys::UniqueFd copy(
        ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!copy) return step_fail(ctx, "open(%s, O_CREAT|O_EXCL)", target.c_str());
    for (;;) {
        ssize_t n = ::sendfile(copy.get(), source.get(), nullptr, 1 << 20);
        if (n == 0) return 0;
        if (n < 0 && errno != EINTR)
            return step_fail(ctx, "sendfile(%s -> %s)", list->source.c_str(), target.c_str());
    }
}

// The script may read its inputs, never change them: each is a copy in a tmpfs of the sandbox's
// own (the host file's path is not in the mount table, as a bind's would be), bound read-only at
// /tmp/work/NAME; a mount point cannot be unlinked or renamed over. The tmpfs is then detached:
// the binds keep it, nothing else reaches it.
int step_copy_inputs(ChildContext& ctx) noexcept {
    const auto& inputs = ctx.plan.inputs;
    if (inputs.empty()) return 0;
    char inside[64];
    std::snprintf(inside, sizeof inside, "/%s", kInputsDir);
    StagedPath dir(ctx, inside);
    if (::mkdir(dir.c_str(), 0700) != 0) return step_fail(ctx, "mkdir(%s)", dir.c_str());
    if (::mount("sandbox-inputs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                ctx.plan.inputs_tmpfs_options.c_str()) != 0)
        return step_fail(ctx, "mount(tmpfs -> %s, %s)", dir.c_str(),
                         ctx.plan.inputs_tmpfs_options.c_str());
    for (const InputFile& input : inputs) {
        StagedPath copy(ctx, inside, input.name.c_str());
        sys::UniqueFd out(::open(copy.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444));
        if (!out || copy_contents(input.fd.get(), out.get()) != 0)
            return step_fail(ctx, "copy(%s -> %s)", input.source.c_str(), copy.c_str());
        StagedPath target(ctx, ctx.plan.workdir.c_str(), input.name.c_str());
        if (make_file(target.c_str()) != 0) return step_fail(ctx, "creat(%s)", target.c_str());
        if (int rc =
                bind_readonly(ctx, copy.c_str(), target.c_str(), kReadOnly | MOUNT_ATTR_NOEXEC);
            rc != 0)
            return rc;
    }
    if (::umount2(dir.c_str(), MNT_DETACH) != 0 || ::rmdir(dir.c_str()) != 0)
        return step_fail(ctx, "umount2/rmdir(%s)", dir.c_str());
    return 0;
}

// --workdir: an overlay at /tmp/work, the host directory below (named by the descriptor the plan
// opened, through /proc/self/fd, so the mount table shows no host path) and a tmpfs of tmp_size
// above: whatever the script writes stays in the sandbox until pysandbox copies it back as plain
// data after the run (workdir.hpp), and no more than tmp_size of it. The upper layer goes to the
// supervisor with step_send_work_dir; its tmpfs is then detached like the inputs'.
int step_mount_workdir_overlay(ChildContext& ctx) noexcept {
    const auto& host = ctx.plan.host_workdir;
    if (!host) return 0;
    char inside[64];
    std::snprintf(inside, sizeof inside, "/%s", kWorkdirLayers);
    StagedPath layers(ctx, inside);
    StagedPath upper(ctx, inside, "upper");
    StagedPath work(ctx, inside, "work");
    if (::mkdir(layers.c_str(), 0700) != 0) return step_fail(ctx, "mkdir(%s)", layers.c_str());
    if (::mount("sandbox-workdir", layers.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                host->tmpfs_options.c_str()) != 0)
        return step_fail(ctx, "mount(tmpfs -> %s, %s)", layers.c_str(),
                         host->tmpfs_options.c_str());
    if (::mkdir(upper.c_str(), 0755) != 0 || ::mkdir(work.c_str(), 0755) != 0)
        return step_fail(ctx, "mkdir(%s/{upper,work})", layers.c_str());
    StagedPath merged(ctx, ctx.plan.workdir.c_str());
    char options[PATH_MAX];
    std::snprintf(options, sizeof options, "lowerdir=/proc/self/fd/%d%s", ctx.workdir_fd,
                  host->overlay_layers.c_str());
    sys::UniqueFd lower(std::exchange(ctx.workdir_fd, -1));
    if (::mount("sandbox-workdir", merged.c_str(), "overlay", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                options) != 0)
        return step_fail(ctx,
                         "mount(overlay -> %s, %s): overlayfs in a user namespace needs "
                         "Linux 5.11, and a tmpfs with user xattrs 6.6",
                         merged.c_str(), options);
    ctx.work_upper = ::open(upper.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ctx.work_upper < 0) return step_fail(ctx, "open(%s, O_DIRECTORY)", upper.c_str());
    if (::umount2(layers.c_str(), MNT_DETACH) != 0 || ::rmdir(layers.c_str()) != 0)
        return step_fail(ctx, "umount2/rmdir(%s)", layers.c_str());
    return 0;
}

// The supervisor lists the artifacts after the run through this descriptor: it keeps the /tmp
// tmpfs alive once the sandbox is gone, and needs no path into the sandbox's mount namespace.
// With --workdir it is the overlay's upper layer instead: what the run changed, and only that.
int step_send_work_dir(ChildContext& ctx) noexcept {
    StagedPath work(ctx, ctx.plan.workdir.c_str());
    sys::UniqueFd dir(ctx.work_upper >= 0
                          ? std::exchange(ctx.work_upper, -1)
                          : ::open(work.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dir) return step_fail(ctx, "open(%s, O_DIRECTORY)", work.c_str());
    Report report{};
    report.kind = ReportKind::work_dir;
    if (sys::send_record(ctx.report_fd, &report, sizeof report, dir.get()) < 0)
        return step_fail(ctx, "sendmsg(report socket, %s)", work.c_str());
    return 0;
}

// Mounted before pivot_root: the kernel lets a user namespace mount procfs only while a fully
// visible procfs exists in its mount namespace, and the host's goes away with the old root.
int step_mount_proc(ChildContext& ctx) noexcept {
    StagedPath proc(ctx, "/proc");
    if (make_dirs(proc.c_str(), 0555) != 0) return step_fail(ctx, "mkdir(%s)", proc.c_str());
    if (::mount("proc", proc.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
        return step_fail(ctx, "mount(proc -> %s)", proc.c_str());
    return 0;
}

int step_mask_proc(ChildContext& ctx) noexcept {
    StagedPath null(ctx, "/dev/null");
    for (const auto& entry : ctx.plan.proc_masked) {
        StagedPath path(ctx, entry.c_str());
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0) continue;  // not in this kernel
        int rc = S_ISDIR(st.st_mode)
                     ? ::mount("masked", path.c_str(), "tmpfs",
                               MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0")
                     : ::mount(null.c_str(), path.c_str(), nullptr, MS_BIND, nullptr);
        if (rc != 0) return step_fail(ctx, "mask %s", path.c_str());
    }
    for (const auto& entry : ctx.plan.proc_readonly) {
        StagedPath path(ctx, entry.c_str());
        if (::access(path.c_str(), F_OK) != 0) continue;
        if (int rc = bind_readonly(ctx, path.c_str(), path.c_str(), kReadOnly | MOUNT_ATTR_NOEXEC);
            rc != 0)
            return rc;
    }
    return 0;
}

int step_pivot_root(ChildContext& ctx) noexcept {
    if (::chdir(kStagingRoot) != 0) return step_fail(ctx, "chdir(%s)", kStagingRoot);
    // pivot_root(".", ".") stacks the old root on top of the new one; detaching it leaves the new
    // root alone, with no directory of the old one reachable.
    if (::syscall(SYS_pivot_root, ".", ".") != 0)
        return step_fail(ctx, "pivot_root(%s, %s)", kStagingRoot, kStagingRoot);
    if (::umount2(".", MNT_DETACH) != 0) return step_fail(ctx, "umount2(old root, MNT_DETACH)");
    if (::chdir("/") != 0) return step_fail(ctx, "chdir(/)");
    return 0;
}

int step_seal_root(ChildContext& ctx) noexcept {
    // Read-only alone under gVisor: runsc's gofer remounts it naming no other flag
    // (step_mount_staging_root).
    const std::uint64_t attr = ctx.plan.gvisor ? MOUNT_ATTR_RDONLY : kReadOnly;
    if (set_attr("/", 0, attr) != 0) return step_fail(ctx, "mount_setattr(/, RDONLY)");
    return 0;
}

int step_enter_workdir(ChildContext& ctx) noexcept {
    if (::chdir(ctx.plan.workdir.c_str()) != 0)
        return step_fail(ctx, "chdir(%s)", ctx.plan.workdir.c_str());
    return 0;
}

}  // namespace pysandbox::mounts
