#pragma once
// Loading a compiled filter (plan/seccomp.hpp compiles it): the one part of seccomp a sandbox's
// inside needs, and all that a zygote's helper (zygote_helper.cpp) takes of it, without
// libseccomp.

#include <linux/filter.h>

#include <vector>

namespace pysandbox::seccomp {

// In the child: loads the program with a user-notification listener. Returns the listener fd or
// -errno. Needs no_new_privs.
int load(const std::vector<sock_filter>& program) noexcept;
// The same without a listener (a nesting filter): 0 or -errno.
int load_without_listener(const std::vector<sock_filter>& program) noexcept;

}  // namespace pysandbox::seccomp
