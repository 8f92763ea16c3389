#pragma once
// How an Outcome is told to a person: nothing when the script ran and ended on its own; one line
// on stderr when the sandbox (not the script) stopped something.

#include <string>

#include "plan.hpp"
#include "supervisor.hpp"

namespace pysandbox {

// The line for stderr (without "pysandbox: " and newline), or empty.
std::string human_summary(const Plan& plan, const Outcome& outcome);

// "SIGKILL" for 9.
std::string signal_name(int sig);

}  // namespace pysandbox
