#pragma once
// The exit status contract (DESIGN.md "Exit codes"; the man page documents it).

#include "outcome.hpp"

namespace pysandbox::exit_codes {

inline constexpr int kTimeout = 124;        // wall-clock limit, as timeout(1)
inline constexpr int kSandboxError = 125;   // pysandbox itself: usage, profile, setup
inline constexpr int kNotExecutable = 126;  // the interpreter cannot be executed
inline constexpr int kNotFound = 127;       // the interpreter does not exist inside
inline constexpr int kSignalBase = 128;     // + N: killed by signal N

int for_outcome(const Outcome& outcome);

}  // namespace pysandbox::exit_codes
