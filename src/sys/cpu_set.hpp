#pragma once

#include <sched.h>

namespace pysandbox::sys {

// `count` of the CPUs in `allowed`, beginning with `first` (or, when `first` is not one of them,
// with the lowest) and going on with the next ones, round. A sandbox pinned there begins on the
// CPU it would run on anyway rather than wait for another, and sandboxes pinned so spread out
// instead of crowding onto the lowest CPUs. No allocation: the child calls it after clone.
inline cpu_set_t cpus_beginning_at(const cpu_set_t& allowed, int count, int first) noexcept {
    if (first < 0 || first >= CPU_SETSIZE || !CPU_ISSET(first, &allowed)) first = 0;
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    for (int i = 0, picked = 0; i < CPU_SETSIZE && picked < count; ++i) {
        const int cpu = (first + i) % CPU_SETSIZE;
        if (CPU_ISSET(cpu, &allowed)) {
            CPU_SET(cpu, &cpus);
            ++picked;
        }
    }
    return cpus;
}

}  // namespace pysandbox::sys
