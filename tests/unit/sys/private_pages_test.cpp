// own_private_pages: after a fork whose child lives on, each page the parent writes faults once
// (copy-on-write); once the parent owns its pages again they do not, and they hold what they held.

#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <vector>

#include "sys/private_pages.hpp"

namespace {

long minor_faults() {
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt;
}

// A child that holds this process's pages until `release` is closed.
pid_t fork_holder(int& release) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(fds[1]);
        char byte = 0;
        [[maybe_unused]] const ssize_t n = ::read(fds[0], &byte, 1);
        ::_exit(0);
    }
    ::close(fds[0]);
    release = fds[1];
    return pid;
}

void end_holder(pid_t pid, int release) {
    ::close(release);
    int status = 0;
    ::waitpid(pid, &status, 0);
}

// Faults taken while writing one byte into each page of `memory`, which must hold `fill`.
long write_each_page(std::vector<char>& memory, std::size_t page, char fill) {
    const long before = minor_faults();
    for (std::size_t at = 0; at < memory.size(); at += page) {
        CHECK(memory[at] == fill);
        memory[at] = static_cast<char>(fill + 1);
    }
    return minor_faults() - before;
}

}  // namespace

TEST_CASE("own_private_pages: the pages a fork shared are the process's own again, unchanged") {
    constexpr std::size_t kPages = 64;
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<char> memory(kPages * page, 'a');  // written, so in memory

    int release = -1;
    pid_t holder = fork_holder(release);
    const long shared = write_each_page(memory, page, 'a');
    end_holder(holder, release);
    CHECK(shared >= static_cast<long>(kPages));  // the measure sees copy-on-write

    holder = fork_holder(release);
    CHECK(pysandbox::sys::own_private_pages() >= kPages);
    const long owned = write_each_page(memory, page, 'b');
    end_holder(holder, release);
    CHECK(owned < static_cast<long>(kPages / 4));
}
