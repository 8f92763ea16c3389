#pragma once
// The error convention, before clone(): functions throw one of these; main() is the only catch and
// maps them to exit codes (but for `pysandbox mcp`, which serves a start-up error to its client:
// run_mcp). After clone() the child never throws: steps return 0 or -errno.

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace pysandbox {

// Bad command line: the message names the flag or the argument.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Bad profile: file:line:column, the dotted key, and what is wrong with it.
struct ProfileError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A failed system call: the call with its arguments, then strerror, then (optionally) the fix.
struct SysError : std::runtime_error {
    SysError(const std::string& call, int err, const std::string& fix = {})
        : std::runtime_error(call + ": " + std::strerror(err) + (fix.empty() ? "" : "\n  " + fix)),
          error(err) {}
    int error;
};

// A user namespace could not be created or set up (clone3, the id maps): the host forbids them.
// main() adds the setting at fault and how to change it (doctor.hpp).
struct UserNamespaceError : SysError {
    using SysError::SysError;
};

// Throws SysError(call, errno) when result is negative; returns result otherwise.
template <typename T>
T check_sys(T result, const std::string& call) {
    if (result < 0) throw SysError(call, errno);
    return result;
}

}  // namespace pysandbox
