// cpus_beginning_at: where a sandbox is pinned, in the child (limits.cpp) and when a warm one moves
// beside its supervisor (sandbox.cpp): as many CPUs as asked, from the one given, round.

#include <doctest/doctest.h>

#include <vector>

#include "sys/cpu_set.hpp"

using pysandbox::sys::cpus_beginning_at;

namespace {

cpu_set_t set_of(const std::vector<int>& cpus) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (const int cpu : cpus) CPU_SET(cpu, &set);
    return set;
}

std::vector<int> list_of(const cpu_set_t& set) {
    std::vector<int> cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    return cpus;
}

}  // namespace

TEST_CASE("cpus_beginning_at: the count asked, from the CPU given, round the allowed ones") {
    const cpu_set_t allowed = set_of({1, 3, 4, 6});
    CHECK(list_of(cpus_beginning_at(allowed, 1, 4)) == std::vector<int>{4});
    CHECK(list_of(cpus_beginning_at(allowed, 2, 4)) == std::vector<int>{4, 6});
    CHECK(list_of(cpus_beginning_at(allowed, 3, 4)) == std::vector<int>{1, 4, 6});
    // More than there are: all of them, none twice.
    CHECK(list_of(cpus_beginning_at(allowed, 8, 6)) == std::vector<int>{1, 3, 4, 6});
    // A CPU not allowed (or none: sched_getcpu failed) begins nowhere: from the lowest.
    CHECK(list_of(cpus_beginning_at(allowed, 2, 5)) == std::vector<int>{1, 3});
    CHECK(list_of(cpus_beginning_at(allowed, 1, -1)) == std::vector<int>{1});
    CHECK(list_of(cpus_beginning_at(allowed, 1, CPU_SETSIZE)) == std::vector<int>{1});
}
