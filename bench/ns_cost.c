// ns_cost: what each new namespace adds to a fork, in wall time and in CPU time.
//
// The child is created by clone(2) with a set of CLONE_NEW* flags (or none: a plain fork),
// optionally mounts a tmpfs (as a sandbox mounts /tmp), and exits at once; the parent waits for
// it. Rounds interleave every set, so a busy moment of the machine hits all alike; printed per
// set: the median over the rounds of the wall time and of the CPU time (this process and its
// reaped children, getrusage) per child. Kernel work done later in a worker thread (a network
// namespace's cleanup_net) is in neither: `perf record -a` sees it.
//
//     cc -O2 -o ns_cost bench/ns_cost.c && ./ns_cost [CHILDREN_PER_ROUND=200] [ROUNDS=9]
//
// As root, or as a user where unprivileged user namespaces are allowed.
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ALL                                                                                 \
    (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | \
     CLONE_NEWCGROUP)

struct set {
    const char *name;
    unsigned long flags;
    int tmpfs;
};

static const struct set sets[] = {
    {"fork", 0, 0},
    {"user", CLONE_NEWUSER, 0},
    {"user+mnt", CLONE_NEWUSER | CLONE_NEWNS, 0},
    {"user+mnt+tmpfs", CLONE_NEWUSER | CLONE_NEWNS, 1},
    {"user+pid", CLONE_NEWUSER | CLONE_NEWPID, 0},
    {"user+net", CLONE_NEWUSER | CLONE_NEWNET, 0},
    {"user+ipc", CLONE_NEWUSER | CLONE_NEWIPC, 0},
    {"user+uts", CLONE_NEWUSER | CLONE_NEWUTS, 0},
    {"user+cgroup", CLONE_NEWUSER | CLONE_NEWCGROUP, 0},
    {"all seven", ALL, 0},
    {"all but net", ALL & ~CLONE_NEWNET, 0},
    {"all seven+tmpfs", ALL, 1},
};
#define SETS (sizeof sets / sizeof *sets)

static double wall_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static double cpu_us(void) {
    struct rusage self, children;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &children);
    const struct timeval *all[] = {&self.ru_utime, &self.ru_stime, &children.ru_utime,
                                   &children.ru_stime};
    double total = 0;
    for (int i = 0; i < 4; ++i) total += all[i]->tv_sec * 1e6 + all[i]->tv_usec;
    return total;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void child(const struct set *set) {
    if (set->tmpfs && (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
                       mount("tmpfs", "/tmp", "tmpfs", 0, "size=1m") != 0))
        _exit(2);
    _exit(0);
}

int main(int argc, char **argv) {
    const int children = argc > 1 ? atoi(argv[1]) : 200;
    const int rounds = argc > 2 ? atoi(argv[2]) : 9;
    if (children < 1 || rounds < 1 || rounds > 999) {
        fprintf(stderr, "usage: ns_cost [CHILDREN_PER_ROUND] [ROUNDS<1000]\n");
        return 2;
    }
    static double wall[SETS][1000], cpu[SETS][1000];
    for (int round = 0; round < rounds; ++round) {
        for (size_t i = 0; i < SETS; ++i) {
            const double wall0 = wall_us(), cpu0 = cpu_us();
            for (int n = 0; n < children; ++n) {
                const long pid = syscall(SYS_clone, sets[i].flags | SIGCHLD, NULL, NULL, NULL, NULL);
                if (pid == 0) child(&sets[i]);
                int status = 0;
                if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0) {
                    fprintf(stderr, "%s: clone or child failed (status %d)\n", sets[i].name, status);
                    return 1;
                }
            }
            wall[i][round] = (wall_us() - wall0) / children;
            cpu[i][round] = (cpu_us() - cpu0) / children;
        }
    }
    printf("%-16s %12s %12s   (median of %d rounds of %d)\n", "clone into", "wall us", "cpu us",
           rounds, children);
    for (size_t i = 0; i < SETS; ++i) {
        qsort(wall[i], rounds, sizeof(double), by_value);
        qsort(cpu[i], rounds, sizeof(double), by_value);
        printf("%-16s %12.0f %12.0f\n", sets[i].name, wall[i][rounds / 2], cpu[i][rounds / 2]);
    }
    return 0;
}
