// cow_cost: what the first write to a page costs after a fork, the page shared copy-on-write
// with a child that lives on (as a sandbox's init shares the server's pages), after that child
// exited (the page the parent's alone, still write-protected), and when MADV_POPULATE_WRITE
// makes the pages the parent's own ahead of the writes (sys/private_pages.hpp). Printed per
// round: microseconds per page of each.
//
//     cc -O2 -o cow_cost bench/cow_cost.c && ./cow_cost [PAGES=256] [ROUNDS=5]
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

// A child that holds the pages until it is killed (lives) or that exits at once.
static pid_t fork_child(int lives) {
    const pid_t pid = fork();
    if (pid == 0) {
        if (lives) pause();
        _exit(0);
    }
    if (!lives) waitpid(pid, NULL, 0);
    return pid;
}

static void end_child(pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static double write_each(char *memory, size_t pages, size_t page) {
    const double start = now_us();
    for (size_t i = 0; i < pages; ++i) memory[i * page]++;
    return (now_us() - start) / pages;
}

int main(int argc, char **argv) {
    const size_t pages = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
    const int rounds = argc > 2 ? atoi(argv[2]) : 5;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *memory = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
    if (memory == MAP_FAILED) return 1;
    for (size_t i = 0; i < pages * page; ++i) memory[i] = 1;
    printf("us per page: shared with a live child, after the child exited, populated ahead "
           "(the madvise, then the writes)\n");
    for (int round = 0; round < rounds; ++round) {
        pid_t child = fork_child(1);
        const double shared = write_each(memory, pages, page);
        end_child(child);
        fork_child(0);
        const double exited = write_each(memory, pages, page);
        child = fork_child(1);
        const double start = now_us();
        madvise(memory, pages * page, MADV_POPULATE_WRITE);
        const double populate = (now_us() - start) / pages;
        const double after = write_each(memory, pages, page);
        end_child(child);
        printf("%8.2f %8.2f %8.2f %8.3f\n", shared, exited, populate, after);
    }
    return 0;
}
