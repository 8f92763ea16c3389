#pragma once
// `pysandbox env`: package environments. `create` runs pip (Debian's python3-pip) inside a
// sandbox of its own: no network, or the proxy with only the index's HOST:PORT allowed; the
// wheelhouse and the requirements copied in as read-only data; the only writable place the
// overlay of a staging directory, bounded in size. What pip wrote comes back as plain files
// (engine/workdir.hpp), is made read-only and hashed, and is published under its hash by one
// rename (plan/env_store.hpp). No package code runs on the host.

#include <map>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "fronts/cli.hpp"
#include "plan/profile.hpp"
#include "plan/request.hpp"

namespace pysandbox::env {

int create(const EnvInvocation& invocation, const std::vector<std::string>& host_env);
int list(const EnvInvocation& invocation, const std::vector<std::string>& host_env);
int show(const EnvInvocation& invocation, const std::vector<std::string>& host_env);
int remove(const EnvInvocation& invocation, const std::vector<std::string>& host_env);
int prune(const EnvInvocation& invocation, const std::vector<std::string>& host_env);

// One requirement as pip reads it from a requirements file: never an option, never two lines.
// Every spec pysandbox passes to pip is checked here, whoever gave it (PKG, --with, a
// requirements file, inline metadata, a request's "requirements"). Throws UsageError naming
// `origin`.
void check_requirement(const std::string& spec, const std::string& origin);

// The last `lines` lines of `text` (of pip's output, in an install_error).
std::string tail(const std::string& text, std::size_t lines);

// A run's packages, unless it names an environment (--with-env): the profile's
// python.requirements, the dependencies of the script's inline metadata (PEP 723),
// `packages.specs` (run --with) and `packages.requirement_files` (--requirements), all
// installed together as `env create` would, from `packages`' sources (--find-links,
// --index-url; neither given: the profile's) into the store of --cache-dir. The ID goes
// into request.overrides.packages: found in the store, or made now (said on stderr first).
// Returns the exit code when the install failed (reported: a result object with --json), or
// nullopt. Throws UsageError for bad input, including a malformed `# /// script` block.
std::optional<int> run_packages(const EnvInvocation& packages, const Profile& profile,
                                Request& request, const std::vector<std::string>& host_env);

// An install that failed: already said on stderr (the message and pip's last lines).
struct InstallFailure {
    int exit_code;        // exit_codes::kInstallError, the documented install_error
    std::string message;  // names the package, with pip's last lines
};

// What a front that starts many sandboxes (session, batch, mcp, kernel) mounts in them: for each
// profile named whose python.requirements list packages, the environment `run` would install for
// them from the profile's find_links/index_url into the store of overrides.cache_dir (found
// there, or made now, once, in a sandbox, and said on stderr), by profile name. None when
// --with-env (overrides.packages) names one for every profile, as it does for run. Called before
// anything is served, so no sandbox of the front ever starts without the packages its profile
// names. Throws ProfileError and UsageError as load_profile and the install's plan do.
using ProfileEnvironments = std::map<std::string, std::string>;
std::variant<ProfileEnvironments, InstallFailure> profile_environments(
    std::span<const std::string> profiles, const Overrides& overrides, int verbose,
    const std::vector<std::string>& host_env);

// The same for a front of one profile (session, kernel): its environment, if any, goes into
// overrides.packages. Returns the install_error's exit code, or nullopt.
std::optional<int> profile_packages(const std::string& profile, Overrides& overrides, int verbose,
                                    const std::vector<std::string>& host_env);

}  // namespace pysandbox::env
