// floor: the kernel work of a namespace sandbox around python3, and nothing else.
//
// What bench/startup.py compares pysandbox against: every namespace (user, mount, pid, network,
// ipc, uts, cgroup), a tmpfs root with /usr read-only (and the /bin, /lib, /lib64, /sbin links
// of a merged-/usr host), a size-capped tmpfs /tmp as the cwd, three devices, a fresh /proc,
// pivot_root, and an init that forks the interpreter and waits for it. No seccomp, Landlock,
// rlimits, capability drop, output supervision or profile: the cost of the isolation itself,
// which a sandbox cannot go below.
//
//     floor SCRIPT        runs /usr/bin/python3 -s /SCRIPT's-name inside, exits with its status
//
// As root, the script runs as host uid 65534 (as pysandbox's); otherwise as the caller.
// Build: cc -O2 -o floor floor.c (bench/startup.py does it when needed).
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROOT "/tmp"  // where the new root is built, as pysandbox does it
#define NAMESPACES                                                                      \
    (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | \
     CLONE_NEWUTS | CLONE_NEWCGROUP)

static void die(const char *what) {
    perror(what);
    _exit(125);
}

static void write_file(const char *path, const char *text, size_t length, mode_t mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0 || write(fd, text, length) != (ssize_t)length || close(fd) != 0) die(path);
}

static void set_attr(const char *path, uint64_t attrs) {
    struct mount_attr attr = {.attr_set = attrs};
    if (syscall(SYS_mount_setattr, AT_FDCWD, path, AT_RECURSIVE, &attr, sizeof attr) != 0)
        die(path);
}

static void bind(const char *source, const char *target, uint64_t attrs) {
    if (mount(source, target, NULL, MS_BIND | MS_REC, NULL) != 0) die(source);
    set_attr(target, attrs);
}

// /bin, /lib, /lib64 and /sbin as links, where the host has them as links (merged /usr).
static void link_top_dirs(void) {
    static const char *const tops[] = {"bin", "lib", "lib64", "sbin"};
    for (size_t i = 0; i < sizeof tops / sizeof *tops; ++i) {
        char host[64], target[256];
        snprintf(host, sizeof host, "/%s", tops[i]);
        ssize_t n = readlink(host, target, sizeof target - 1);
        if (n < 0) continue;
        target[n] = '\0';
        snprintf(host, sizeof host, ROOT "/%s", tops[i]);
        if (symlink(target, host) != 0) die(host);
    }
}

static void build_root(const char *script, size_t script_length) {
    const uint64_t ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die("make / private");
    if (mount("floor", ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64m") != 0)
        die("tmpfs root");
    if (mkdir(ROOT "/usr", 0755) != 0) die("mkdir usr");
    bind("/usr", ROOT "/usr", ro);
    link_top_dirs();
    write_file(ROOT "/script.py", script, script_length, 0444);
    if (mkdir(ROOT "/tmp", 0755) != 0) die("mkdir tmp");
    if (mount("floor-tmp", ROOT "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=64m,mode=0755,uid=1000,gid=1000") != 0)
        die("tmpfs /tmp");
    if (mkdir(ROOT "/dev", 0755) != 0) die("mkdir dev");
    static const char *const devices[] = {"/dev/null", "/dev/zero", "/dev/urandom"};
    for (size_t i = 0; i < 3; ++i) {
        char target[64];
        snprintf(target, sizeof target, ROOT "%s", devices[i]);
        write_file(target, "", 0, 0444);
        bind(devices[i], target, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
    }
    // Before pivot_root: a user namespace may mount proc only while a full one is visible.
    if (mkdir(ROOT "/proc", 0555) != 0) die("mkdir proc");
    if (mount("proc", ROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        die("mount proc");
    if (chdir(ROOT) != 0 || syscall(SYS_pivot_root, ".", ".") != 0) die("pivot_root");
    if (umount2(".", MNT_DETACH) != 0 || chdir("/tmp") != 0) die("detach the old root");
}

// PID 1: forks the interpreter, reaps everything, exits with the interpreter's status.
static void run_init(void) {
    static char *const argv[] = {"python3", "-s", "/script.py", NULL};
    static char *const envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8",
                                 "PYTHONDONTWRITEBYTECODE=1", NULL};
    pid_t python = fork();
    if (python < 0) die("fork");
    if (python == 0) {
        execve("/usr/bin/python3", argv, envp);
        die("execve(/usr/bin/python3)");
    }
    int status = 0, python_status = 0;
    pid_t pid;
    while ((pid = wait(&status)) > 0)
        if (pid == python) python_status = status;
    _exit(WIFEXITED(python_status) ? WEXITSTATUS(python_status) : 128 + WTERMSIG(python_status));
}

static void write_id_maps(pid_t child, unsigned outer_uid, unsigned outer_gid) {
    char path[64], map[64];
    snprintf(path, sizeof path, "/proc/%d/setgroups", child);
    write_file(path, "deny", 4, 0);
    snprintf(path, sizeof path, "/proc/%d/uid_map", child);
    write_file(path, map, (size_t)snprintf(map, sizeof map, "1000 %u 1\n", outer_uid), 0);
    snprintf(path, sizeof path, "/proc/%d/gid_map", child);
    write_file(path, map, (size_t)snprintf(map, sizeof map, "1000 %u 1\n", outer_gid), 0);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: floor SCRIPT\n");
        return 125;
    }
    static char script[1 << 16];
    int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    ssize_t length = fd < 0 ? -1 : read(fd, script, sizeof script);
    if (length < 0) die(argv[1]);
    close(fd);
    const int root = geteuid() == 0;
    const unsigned outer_uid = root ? 65534 : geteuid(), outer_gid = root ? 65534 : getegid();
    if (root && setgroups(0, NULL) != 0) die("setgroups");
    int go[2];
    if (pipe2(go, O_CLOEXEC) != 0) die("pipe");

    struct clone_args args = {.flags = NAMESPACES, .exit_signal = SIGCHLD};
    pid_t child = (pid_t)syscall(SYS_clone3, &args, sizeof args);
    if (child < 0) die("clone3");
    if (child == 0) {
        char byte;
        close(go[1]);
        if (read(go[0], &byte, 1) != 1) die("wait for the id maps");
        if (setresgid(1000, 1000, 1000) != 0 || setresuid(1000, 1000, 1000) != 0) die("setres*id");
        build_root(script, (size_t)length);
        run_init();
    }
    close(go[0]);
    write_id_maps(child, outer_uid, outer_gid);
    if (write(go[1], "1", 1) != 1) die("release the child");
    int status = 0;
    if (waitpid(child, &status, 0) != child) die("waitpid");
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
