#pragma once
// The seccomp allowlist as data: every system call the filter allows outright, the least level
// (minimal, standard, processes) that allows it and what needs it, measured; and the newer calls
// libc falls back from. The compiler (seccomp.hpp) builds filters from it; `pysandbox profile
// syscalls` and the documentation show it.

#include <span>

namespace pysandbox::seccomp {

// One row of the allowlist.
enum class Level { minimal, standard, processes };
struct Allowed {
    const char* name;
    Level level;  // the least that allows it
    const char* reason;
};
std::span<const Allowed> allowlist_table();

// The calls the filter answers ENOSYS itself, without asking the supervisor: newer calls that
// libc tries before an older one, so it falls back as it would on an older kernel.
std::span<const char* const> fallback_calls();

}  // namespace pysandbox::seccomp
