#pragma once
// `pysandbox doctor`: what this host allows, and for each missing piece what it means and the
// command that fixes it.

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace pysandbox::doctor {

// `doctor --json` prints one object: {"schema", "version", "ok", "checks": [{"name", "ok",
// "required", "detail", "fix"}]}; "ok" is true when every required check passed, and a check's
// "fix" is null when it passed.
inline constexpr std::string_view kDoctorSchema = "pysandbox.doctor/v1";

struct Check {
    std::string name;
    bool ok = false;
    bool required = true;  // a failed required check means `pysandbox run` refuses to run
    std::string detail;    // what was found
    std::string fix;       // what to do when !ok
};

// What doctor is asked to check besides the host kernel's sandbox.
struct Options {
    // doctor --kernel gvisor: gVisor is required (as it is when the default profile asks for it);
    // otherwise an optional layer whose failure only warns.
    bool gvisor = false;
    std::vector<std::string> host_env;  // the caller's: runsc is looked for on its PATH
};

// gVisor's probe ends at this wall-clock limit, runsc and all: a platform that hangs (kvm did in
// a nested VM) must not hang doctor. runsc starts in about half a second.
inline constexpr std::chrono::milliseconds kGvisorProbeLimit{10'000};

std::vector<Check> run_checks(const Options& options);

// What to tell the user when user namespaces cannot be created or set up: the host's setting at
// fault and the command that changes it.
std::string user_namespace_hint();

nlohmann::ordered_json report_json(const std::vector<Check>& checks);

// Prints the checks (as text or JSON) and returns the exit status: 0 when every required check
// passed, 1 otherwise.
int report(const std::vector<Check>& checks, bool json);

}  // namespace pysandbox::doctor
