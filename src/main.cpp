// pysandbox: run an untrusted Python program in a locked-down Linux sandbox.
// This is the only place that catches: every error becomes one line on stderr and an exit code.

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "batch.hpp"
#include "check.hpp"
#include "cli.hpp"
#include "doctor.hpp"
#include "errors.hpp"
#include "execute.hpp"
#include "exit_codes.hpp"
#include "incident.hpp"
#include "json_text.hpp"
#include "mcp.hpp"
#include "plan.hpp"
#include "profile.hpp"
#include "result.hpp"
#include "seccomp.hpp"
#include "session_front.hpp"
#include "sys/write_size.hpp"
#include "units.hpp"

extern char** environ;

namespace pysandbox {
namespace {

// The sandboxes' setup passes descriptors to the supervisor (SCM_RIGHTS), which the kernel refuses
// once the host user has more in flight than the sender's soft RLIMIT_NOFILE; every sandbox of
// one user counts, and a script can keep up to its own limit's worth in flight. The setup inherits
// this limit (the script's own comes last, limits.hpp), so it is raised as far as the host allows.
void raise_open_files_limit() {
    rlimit files{};
    if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
        files.rlim_cur = files.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &files);  // best effort: a lower limit only lowers that margin
    }
}

// A pipe created later must never land on 0, 1 or 2 because the caller closed one of them.
void ensure_standard_fds() {
    for (int fd = 0; fd <= 2; ++fd)
        if (::fcntl(fd, F_GETFD) < 0) ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
}

std::vector<std::string> host_environment() {
    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) env.emplace_back(*entry);
    return env;
}

void say(const std::string& line) {
    std::cerr << "pysandbox: " << line << std::endl;
}

void describe_plan(const Plan& plan) {
    const Limits& limits = plan.profile.limits;
    std::string sources;
    for (const auto& source : plan.profile.sources) sources += " " + source.string();
    say("profile " + plan.profile.name + " (" + sources.substr(sources.empty() ? 0 : 1) + ")");
    say("limits: wall " + units::format_duration(limits.wall_time) + ", cpu " +
        units::format_duration(limits.cpu_time) + ", memory " + units::format_size(limits.memory) +
        ", procs " + std::to_string(limits.max_procs) + ", /tmp " +
        units::format_size(limits.tmp_size));
    say("network: " + std::string(to_string(plan.profile.network.mode)));
    std::string binds;
    for (const auto& bind : plan.ro_binds) binds += " " + bind.source;
    say("read-only:" + binds);
    say(plan.cgroup ? "memory and processes: cgroup " + plan.cgroup->dir.string()
                    : "memory and processes: rlimits (no delegated cgroup v2: " +
                          plan.cgroup_unavailable + ")");
    say("runs as host uid " + std::to_string(plan.ids.outer_uid));
    if (plan.font_list)
        say("matplotlib font list: " + plan.font_list->source + ", copied to " +
            plan.font_list->target);
    say(plan.landlock.abi > 0 ? "landlock: ABI " + std::to_string(plan.landlock.abi)
                              : "landlock: not in this kernel (degraded: the read-only mounts "
                                "alone keep writes in /tmp)");
}

// --trace-syscalls in human mode: one line per call, and how to allow a denied one.
void describe_trace(const Outcome& outcome) {
    if (!outcome.traced_syscalls) return;
    say("system calls the script made, as the profile answers them (--trace-syscalls):");
    bool denied = false;
    for (const auto& [name, call] : *outcome.traced_syscalls) {
        char line[160];
        std::snprintf(line, sizeof line, "  %-24s %8llu  %s", name.c_str(),
                      static_cast<unsigned long long>(call.count), call.verdict.c_str());
        say(line);
        denied = denied || call.verdict == "denied";
    }
    if (denied)
        say("to allow a denied call, add it to a profile: [seccomp] allow = [\"NAME\"] "
            "(pysandbox(1), SYSTEM CALLS, says what that widens)");
}

int run(const RunInvocation& invocation) {
    Profile profile = load_profile(invocation.profile, profile_search_dirs());
    std::unique_ptr<const Plan> plan =
        make_plan(std::move(profile), invocation.request, host_environment());
    if (plan->verbose) describe_plan(*plan);
    Outcome outcome = execute(*plan);
    if (plan->verbose)
        say("setup " + std::to_string(outcome.setup.count()) + " ms, script " +
            std::to_string(outcome.wall.count()) + " ms wall, " + std::to_string(outcome.cpu_ms) +
            " ms cpu, " + std::to_string(outcome.max_rss_kib) + " KiB max rss");
    const int exit_code = exit_codes::for_outcome(outcome);
    if (const auto entry = incident::run_entry(*plan, outcome); !entry.is_null())
        if (std::string problem = incident::append(*plan, entry); !problem.empty())
            say("warning: " + problem);
    if (plan->capture_output) {
        std::cout.flush();
        sys::grow_pipe(STDOUT_FILENO);
        write_line(result_json(*plan, std::move(outcome), exit_code), std::cout);
        return exit_code;
    }
    describe_trace(outcome);
    for (const std::string& warning : outcome.warnings) say("warning: " + warning);
    if (std::string summary = human_summary(*plan, outcome); !summary.empty()) say(summary);
    return exit_code;
}

int profile_list() {
    for (const auto& [name, file] : list_profiles(profile_search_dirs())) {
        std::string description;
        try {
            description = load_profile(file.string(), profile_search_dirs()).description;
        } catch (const ProfileError& e) {
            description = std::string("(invalid: ") + e.what() + ")";
        }
        std::cout << name << "\t" << description << "\n";
    }
    return 0;
}

int profile_show(const std::string& name) {
    Profile profile = load_profile(name, profile_search_dirs());
    std::cout << "# " << profile.name << ", from:";
    for (const auto& source : profile.sources) std::cout << " " << source.string();
    const auto sockets = profile.network.mode == NetMode::none ? seccomp::Sockets::unix_only
                                                               : seccomp::Sockets::unix_and_inet;
    std::cout << "\n# seccomp allows " << seccomp::allowed_calls(profile.seccomp, sockets).size()
              << " system calls (x86_64); everything else is denied\n"
              << to_toml(profile);
    return 0;
}

// Which JSON object an error is owed: --json asked for one, even when the command line is bad.
enum class JsonWanted { none, run_result, check_result };

JsonWanted wants_json(CommandLine& command_line) {
    if (!command_line.json_requested()) return JsonWanted::none;
    return command_line.parsed("check") ? JsonWanted::check_result : JsonWanted::run_result;
}

// Every error pysandbox itself hits: one line on stderr, and the result object when one is due.
int fail(JsonWanted json, std::string_view kind, std::string_view message,
         std::string_view profile) {
    std::cerr << "pysandbox: " << kind << ": " << message << "\n";
    const std::string line = std::string(kind) + ": " + std::string(message);
    if (json == JsonWanted::run_result)
        std::cout << dump_line(early_error_json(line, profile)) << std::endl;
    else if (json == JsonWanted::check_result)
        std::cout << check::error_json(line) << std::endl;
    return exit_codes::kSandboxError;
}

int dispatch(const Invocation& invocation) {
    switch (invocation.command) {
        case Command::run: return run(invocation.run);
        case Command::check: return check::run(invocation.check, host_environment());
        case Command::session: return run_session(invocation.session, host_environment());
        case Command::mcp: return run_mcp(invocation.mcp, host_environment());
        case Command::batch: return run_batch(invocation.batch, host_environment());
        case Command::profile_list: return profile_list();
        case Command::profile_show: return profile_show(invocation.profile_name);
        case Command::doctor: return doctor::report(doctor::run_checks(), invocation.doctor_json);
        case Command::none: break;
    }
    throw UsageError("no command given; see pysandbox --help");
}

}  // namespace
}  // namespace pysandbox

int main(int argc, char** argv) {
    using namespace pysandbox;
    ensure_standard_fds();
    raise_open_files_limit();
    ::signal(SIGPIPE, SIG_IGN);  // a closed stdout is an EPIPE to handle, not a death

    CommandLine command_line;
    try {
        command_line.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return command_line.app().exit(e);  // --help, --version
        const JsonWanted json = wants_json(command_line);
        const int code = fail(json, "error", e.what(), command_line.invocation().run.profile);
        if (json == JsonWanted::none) std::cerr << "Run 'pysandbox --help' for usage.\n";
        return code;
    }
    const Invocation& invocation = command_line.invocation();
    const JsonWanted json = wants_json(command_line);
    const std::string& profile = invocation.command == Command::check ? invocation.check.profile
                                 : invocation.command == Command::session
                                     ? invocation.session.profile
                                     : invocation.run.profile;
    try {
        return dispatch(invocation);
    } catch (const UsageError& e) {
        return fail(json, "error", e.what(), profile);
    } catch (const ProfileError& e) {
        return fail(json, "profile error", e.what(), profile);
    } catch (const UserNamespaceError& e) {
        return fail(json, "error",
                    std::string(e.what()) +
                        "\n  cannot create user namespaces: " + doctor::user_namespace_hint(),
                    profile);
    } catch (const SysError& e) {
        return fail(json, "error", e.what(), profile);
    } catch (const std::exception& e) {
        return fail(json, "internal error", e.what(), profile);
    }
}
