#pragma once
// The exit codes pysandbox reports (pysandbox(1), EXIT STATUS), which the inside also exits with
// when it fails before the script starts: the supervisor reads them from the child's and init's
// wait status. Which one a run ends with is report/exit_codes.hpp's business.

namespace pysandbox::exit_codes {

inline constexpr int kTimeout = 124;        // wall-clock limit, as timeout(1)
inline constexpr int kSandboxError = 125;   // pysandbox itself: usage, profile, setup
inline constexpr int kNotExecutable = 126;  // the interpreter cannot be executed
inline constexpr int kNotFound = 127;       // the interpreter does not exist inside
inline constexpr int kSignalBase = 128;     // + N: killed by signal N

}  // namespace pysandbox::exit_codes
