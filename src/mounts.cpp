#include "mounts.hpp"

#include <fcntl.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <utility>

#include "report.hpp"
#include "sys/records.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox::mounts {
namespace {

// A path beneath the staging root, built without allocating.
struct StagedPath {
    char text[PATH_MAX];
    explicit StagedPath(const char* inside) noexcept {
        std::snprintf(text, sizeof text, "%s%s", kStagingRoot, inside);
    }
    StagedPath(const char* inside_dir, const char* name) noexcept {
        std::snprintf(text, sizeof text, "%s%s/%s", kStagingRoot, inside_dir, name);
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

// A detached copy of the mount tree at `path`, to attach elsewhere later with attach_tree.
int clone_tree(const char* path) noexcept {
    return static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, path,
                                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE));
}

int attach_tree(ChildContext& ctx, int tree, const char* target, std::uint64_t attrs) noexcept {
    sys::UniqueFd owned(tree);
    if (::syscall(SYS_move_mount, tree, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) != 0)
        return step_fail(ctx, "move_mount(-> %s)", target);
    if (set_attr(target, AT_RECURSIVE, attrs) != 0)
        return step_fail(ctx, "mount_setattr(%s, AT_RECURSIVE, 0x%llx)", target,
                         static_cast<unsigned long long>(attrs));
    return 0;
}

}  // namespace

int step_make_mounts_private(ChildContext& ctx) noexcept {
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        return step_fail(ctx, "mount(/, MS_REC|MS_PRIVATE)");
    return 0;
}

int step_clone_host_files(ChildContext& ctx) noexcept {
    for (std::size_t i = 0; i < ctx.plan.inputs.size(); ++i) {
        const char* source = ctx.plan.inputs[i].source.c_str();
        ctx.input_trees[i] = clone_tree(source);
        if (ctx.input_trees[i] < 0) return step_fail(ctx, "open_tree(%s, OPEN_TREE_CLONE)", source);
    }
    if (const auto& host = ctx.plan.host_workdir) {
        ctx.workdir_tree = clone_tree(host->c_str());
        if (ctx.workdir_tree < 0)
            return step_fail(ctx, "open_tree(%s, OPEN_TREE_CLONE)", host->c_str());
    }
    return 0;
}

int step_open_font_list(ChildContext& ctx) noexcept {
    const auto& list = ctx.plan.font_list;
    if (!list) return 0;
    ctx.font_list_fd = ::open(list->source.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (ctx.font_list_fd < 0) return step_fail(ctx, "open(%s, O_RDONLY)", list->source.c_str());
    return 0;
}

int step_mount_staging_root(ChildContext& ctx) noexcept {
    if (::mount("sandbox-root", kStagingRoot, "tmpfs", MS_NOSUID | MS_NODEV,
                "mode=0755,size=64m") != 0)
        return step_fail(ctx, "mount(tmpfs -> %s)", kStagingRoot);
    return 0;
}

int step_bind_host_paths(ChildContext& ctx) noexcept {
    for (const auto& bind : ctx.plan.ro_binds) {
        StagedPath target(bind.source.c_str());
        int made = bind.is_directory ? make_dirs(target.c_str(), 0755) : make_file(target.c_str());
        if (made != 0) return step_fail(ctx, "mkdir/creat(%s)", target.c_str());
        if (int rc = bind_readonly(ctx, bind.source.c_str(), target.c_str(), kReadOnly); rc != 0)
            return rc;
    }
    for (const auto& link : ctx.plan.symlinks) {
        StagedPath path(link.path.c_str());
        if (make_parent_dirs(path.c_str()) != 0 ||
            ::symlink(link.target.c_str(), path.c_str()) != 0)
            return step_fail(ctx, "symlink(%s -> %s)", path.c_str(), link.target.c_str());
    }
    return 0;
}

int step_write_files(ChildContext& ctx) noexcept {
    for (const auto& file : ctx.plan.files) {
        StagedPath path(file.path.c_str());
        if (write_file(path.c_str(), file.content, file.mode) != 0)
            return step_fail(ctx, "write(%s)", path.c_str());
    }
    return 0;
}

int step_populate_dev(ChildContext& ctx) noexcept {
    for (const auto& device : ctx.plan.devices) {
        StagedPath target(device.c_str());
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
        StagedPath path(inside);
        if (::symlink(target, path.c_str()) != 0)
            return step_fail(ctx, "symlink(%s -> %s)", path.c_str(), target);
    }
    return 0;
}

int step_mount_tmp(ChildContext& ctx) noexcept {
    StagedPath tmp("/tmp");
    if (make_dirs(tmp.c_str(), 0755) != 0) return step_fail(ctx, "mkdir(%s)", tmp.c_str());
    if (::mount("sandbox-tmp", tmp.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                ctx.plan.tmp_mount_options.c_str()) != 0)
        return step_fail(ctx, "mount(tmpfs -> %s, %s)", tmp.c_str(),
                         ctx.plan.tmp_mount_options.c_str());
    StagedPath work(ctx.plan.workdir.c_str());
    if (make_dirs(work.c_str(), 0755) != 0) return step_fail(ctx, "mkdir(%s)", work.c_str());
    if (!ctx.plan.host_workdir) return 0;
    // Writable, but as /tmp is: nothing in it runs or acts as a device or a set-uid program.
    return attach_tree(ctx, std::exchange(ctx.workdir_tree, -1), work.c_str(),
                       MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
}

// A copy owned by the run: matplotlib rewrites it when it finds the list stale (a font gone since
// the build), the script may change it, and both end with the run's /tmp.
int step_copy_font_list(ChildContext& ctx) noexcept {
    const auto& list = ctx.plan.font_list;
    if (!list) return 0;
    sys::UniqueFd source(std::exchange(ctx.font_list_fd, -1));
    StagedPath target(list->target.c_str());
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

// The script may read its inputs, never change them: the mount is read-only, and a mount point
// cannot be unlinked or renamed over.
int step_bind_inputs(ChildContext& ctx) noexcept {
    for (std::size_t i = 0; i < ctx.plan.inputs.size(); ++i) {
        StagedPath target(ctx.plan.workdir.c_str(), ctx.plan.inputs[i].name.c_str());
        if (make_file(target.c_str()) != 0) return step_fail(ctx, "creat(%s)", target.c_str());
        if (int rc = attach_tree(ctx, std::exchange(ctx.input_trees[i], -1), target.c_str(),
                                 kReadOnly | MOUNT_ATTR_NOEXEC);
            rc != 0)
            return rc;
    }
    return 0;
}

// The supervisor lists the artifacts after the run through this descriptor: it keeps the /tmp
// tmpfs alive once the sandbox is gone, and needs no path into the sandbox's mount namespace.
int step_send_work_dir(ChildContext& ctx) noexcept {
    StagedPath work(ctx.plan.workdir.c_str());
    sys::UniqueFd dir(::open(work.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
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
    StagedPath proc("/proc");
    if (make_dirs(proc.c_str(), 0555) != 0) return step_fail(ctx, "mkdir(%s)", proc.c_str());
    if (::mount("proc", proc.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
        return step_fail(ctx, "mount(proc -> %s)", proc.c_str());
    StagedPath null("/dev/null");
    for (const auto& entry : ctx.plan.proc_masked) {
        StagedPath path(entry.c_str());
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0) continue;  // not in this kernel
        int rc = S_ISDIR(st.st_mode)
                     ? ::mount("masked", path.c_str(), "tmpfs",
                               MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0")
                     : ::mount(null.c_str(), path.c_str(), nullptr, MS_BIND, nullptr);
        if (rc != 0) return step_fail(ctx, "mask %s", path.c_str());
    }
    for (const auto& entry : ctx.plan.proc_readonly) {
        StagedPath path(entry.c_str());
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
    if (set_attr("/", 0, kReadOnly) != 0) return step_fail(ctx, "mount_setattr(/, RDONLY)");
    if (::chdir(ctx.plan.workdir.c_str()) != 0)
        return step_fail(ctx, "chdir(%s)", ctx.plan.workdir.c_str());
    return 0;
}

}  // namespace pysandbox::mounts
