#include "fronts/run.hpp"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "engine/execute.hpp"
#include "fronts/env.hpp"
#include "fronts/front_loop.hpp"
#include "plan/plan.hpp"
#include "plan/profile.hpp"
#include "plan/units.hpp"
#include "report/exit_codes.hpp"
#include "report/incident.hpp"
#include "report/json_text.hpp"
#include "report/result.hpp"
#include "report/status.hpp"
#include "sys/errors.hpp"
#include "sys/write_size.hpp"

namespace pysandbox {
namespace {

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
    if (plan.landlock.abi > 0) {
        std::string rights;
        for (const std::string& right : landlock::handled_rights(plan.landlock))
            rights += (rights.empty() ? "" : ", ") + right;
        say("landlock: ABI " + std::to_string(plan.landlock.abi) + " (" + rights + ")");
    } else {
        say("landlock: not in this kernel (degraded: the read-only mounts alone keep writes in "
            "/tmp)");
    }
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

}  // namespace

int run(const RunInvocation& invocation, const std::vector<std::string>& host_env) {
    Profile profile = load_profile(invocation.profile, profile_search_dirs());
    Request request = invocation.request;
    if (const auto code = env::run_packages(invocation.packages, profile, request, host_env))
        return *code;
    std::unique_ptr<const Plan> plan = make_plan(std::move(profile), request, host_env);
    if (plan->verbose) describe_plan(*plan);
    Outcome outcome = execute(*plan);
    if (plan->verbose)
        say("setup " + std::to_string(outcome.setup.count()) + " ms, script " +
            std::to_string(outcome.wall.count()) + " ms wall, " + std::to_string(outcome.cpu_ms) +
            " ms cpu, " + std::to_string(outcome.max_rss_kib) + " KiB max rss");
    int exit_code = exit_codes::for_outcome(outcome);
    // The script ended well but its output was cut: with --fail-on-truncation that is a failure.
    if (invocation.fail_on_truncation && exit_code == 0 && output_truncated(outcome))
        exit_code = exit_codes::kOutputTruncated;
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
    const std::optional<PythonException> exception = find_exception(*plan, outcome);
    if (std::string summary = human_summary(*plan, outcome, exception); !summary.empty())
        say(summary);
    for (const std::string& note : human_notes(*plan, outcome, exception)) say(note);
    return exit_code;
}

}  // namespace pysandbox
