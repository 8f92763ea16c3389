#pragma once
// `pysandbox doctor`: what this host allows, and for each missing piece what it means and the
// command that fixes it.

#include <string>
#include <vector>

namespace pysandbox::doctor {

struct Check {
    std::string name;
    bool ok = false;
    bool required = true;  // a failed required check means `pysandbox run` refuses to run
    std::string detail;    // what was found
    std::string fix;       // what to do when !ok
};

std::vector<Check> run_checks();

// What to tell the user when user namespaces cannot be created or set up: the host's setting at
// fault and the command that changes it.
std::string user_namespace_hint();

// Prints the checks (as text or JSON) and returns the exit status: 0 when every required check
// passed, 1 otherwise.
int report(const std::vector<Check>& checks, bool json);

}  // namespace pysandbox::doctor
