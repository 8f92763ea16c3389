#include "report/result.hpp"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "embed/version.hpp"
#include "plan/gvisor.hpp"
#include "plan/units.hpp"
#include "report/encoding.hpp"
#include "report/exit_codes.hpp"
#include "report/json_text.hpp"
#include "report/violations.hpp"
#include "sys/apparmor.hpp"

namespace pysandbox {
namespace {

using Kind = Outcome::Kind;

// A set-up step refused with EPERM where AppArmor restricts this user's namespaces: the namespace
// has no capabilities (sys/apparmor.hpp), the likely cause, and doctor names the fixes.
std::string setup_cause(const Outcome& outcome) {
    if (outcome.error != EPERM || !apparmor::restricts_caller()) return {};
    return "; likely cause: AppArmor restricts unprivileged user namespaces on this host "
           "(kernel.apparmor_restrict_unprivileged_userns = 1) and no AppArmor profile allows "
           "them for pysandbox: run `pysandbox doctor` for the fix";
}

std::string join(const std::string& a, const std::string& b) {
    if (a.empty() || b.empty()) return a + b;
    return a + "\npysandbox: " + b;
}

// "the sandbox policy denied 3 system calls: bpf x2, mount", or empty.
std::string count_summary(const std::map<std::string, std::uint64_t>& counts,
                          const std::string& verb, const std::string& noun) {
    if (counts.empty()) return {};
    std::string items;
    std::uint64_t total = 0;
    for (const auto& [name, count] : counts) {
        items +=
            (items.empty() ? "" : ", ") + name + (count > 1 ? " x" + std::to_string(count) : "");
        total += count;
    }
    return "the sandbox policy " + verb + " " + std::to_string(total) + " " + noun +
           (total > 1 ? "s" : "") + ": " + items;
}

// The audit hook's blocks, by kind: "import" -> {"subprocess": 1}.
std::map<std::string, std::map<std::string, std::uint64_t>> policy_blocks_by_kind(
    const Outcome& outcome) {
    std::map<std::string, std::map<std::string, std::uint64_t>> by_kind;
    for (const auto& [key, count] : outcome.policy.blocks) by_kind[key.first][key.second] = count;
    return by_kind;
}

std::string blocked_summary(const Outcome& outcome) {
    auto policy = policy_blocks_by_kind(outcome);
    return join(join(count_summary(outcome.blocked_syscalls, "denied", "system call"),
                     count_summary(outcome.blocked_connections, "blocked", "network connection")),
                join(count_summary(policy["import"], "blocked", "import"),
                     count_summary(policy["call"], "blocked", "call")));
}

std::string output_summary(const Plan& plan, const Outcome& outcome) {
    std::uint64_t omitted = outcome.stdout_omitted + outcome.stderr_omitted;
    if (omitted == 0) return {};
    return "output limit of " + units::format_size(plan.profile.limits.output_limit) +
           " reached; " + std::to_string(omitted) + " bytes omitted from the middle";
}

// "exited with status 3", when the script chose a failing status and no traceback says why (nor
// a reader of its stdout that went away: Python exits 120 when its last flush fails).
std::string exit_summary(const Outcome& outcome, const std::optional<PythonException>& exception) {
    if (outcome.exit_code == 0 || exception || outcome.stdout_reader_gone) return {};
    return "exited with status " + std::to_string(outcome.exit_code);
}

std::string memory_summary(const Plan& plan) {
    return "memory limit of " + units::format_size(plan.profile.limits.memory) + " reached";
}

// The first few names, and how many more ("and 4 more").
std::string first_names(const std::vector<const artifacts::Artifact*>& files, std::uint64_t total) {
    constexpr std::size_t kNamed = 3;
    std::string names;
    for (std::size_t i = 0; i < files.size() && i < kNamed; ++i)
        names += (i == 0 ? "" : ", ") + files[i]->path +
                 (files[i]->skipped.empty() ? "" : " (" + files[i]->skipped + ")");
    const std::uint64_t named = std::min<std::uint64_t>(files.size(), kNamed);
    if (total > named) names += " and " + std::to_string(total - named) + " more";
    return names;
}

std::string files_count(std::uint64_t count) {
    return std::to_string(count) + (count == 1 ? " file" : " files");
}

// The files the run left that are not on the host: all of them without --output-dir (and
// without --workdir, where they are the host's already), the skipped ones with it.
std::string lost_files_note(const Plan& plan, const Outcome& outcome) {
    if (plan.host_workdir) return {};
    std::vector<const artifacts::Artifact*> lost;
    for (const auto& file : outcome.files)
        if (!plan.output_dir || !file.skipped.empty()) lost.push_back(&file);
    const std::uint64_t total = lost.size() + outcome.files_omitted;
    if (total == 0) return {};
    if (!plan.output_dir)
        return files_count(total) + " left in /tmp/work " + (total == 1 ? "was" : "were") +
               " not kept (" + first_names(lost, total) + "); add --output-dir DIR to keep them";
    return files_count(total) + " not copied to " + *plan.output_dir + " (" +
           first_names(lost, total) + "); the result's \"files\" (--json) says why";
}

// --output-runs: which run-N this run's files went to, as the caller cannot know it beforehand.
std::string run_dir_note(const Plan& plan, const Outcome& outcome) {
    if (!plan.output_runs) return {};
    std::uint64_t copied = 0;
    std::string dir;
    for (const auto& file : outcome.files) {
        if (!file.host_path || file.host_path->size() <= file.path.size()) continue;
        ++copied;
        dir = file.host_path->substr(0, file.host_path->size() - file.path.size() - 1);
    }
    if (copied == 0) return {};
    return files_count(copied) + " kept in " + dir;
}

}  // namespace

std::string human_summary(const Plan& plan, const Outcome& outcome) {
    return human_summary(plan, outcome, find_exception(plan, outcome));
}

std::string human_summary(const Plan& plan, const Outcome& outcome,
                          const std::optional<PythonException>& exception) {
    const Limits& limits = plan.profile.limits;
    const std::string hook_warning =
        !hook_missing(plan, outcome) ? ""
        // runsc passes the script no descriptor but stdio (plan/gvisor.hpp).
        : plan.gvisor ? "under gVisor the [policy] audit hook blocks inside, but its records do "
                        "not reach pysandbox (blocked imports and calls are not listed)"
                      : "the [policy] audit hook did not report itself installed (only the "
                        "kernel layers applied); does python.args disable site or PYTHONPATH?";
    switch (outcome.kind) {
        case Kind::exited:
            if (hit_memory_limit(plan, outcome, exception))
                return join(memory_summary(plan) + " (" + exception->type + ")",
                            join(blocked_summary(outcome), hook_warning));
            return join(join(exit_summary(outcome, exception), output_summary(plan, outcome)),
                        join(blocked_summary(outcome), hook_warning));
        case Kind::signaled:
            if (hit_cpu_limit(plan, outcome))
                return "CPU time limit of " + units::format_duration(limits.cpu_time) +
                       " reached; the script was killed";
            if (hit_memory_limit(plan, outcome, std::nullopt))
                return memory_summary(plan) + "; the script was killed";
            return join(join(output_summary(plan, outcome), blocked_summary(outcome)),
                        hook_warning);
        case Kind::timeout:
            return "wall-clock limit of " + units::format_duration(limits.wall_time) +
                   " reached; the sandbox was killed";
        case Kind::interrupted:
            return "interrupted by " + signal_name(outcome.signal) + "; the sandbox was stopped";
        case Kind::setup_failed:
            return "sandbox setup failed at step \"" + outcome.step + "\": " + outcome.detail +
                   ": " + std::strerror(outcome.error) + "; the script was not run" +
                   setup_cause(outcome);
        case Kind::exec_failed:
            if (outcome.error == ENOENT || outcome.error == ENOTDIR)
                return "interpreter " + plan.interpreter +
                       " not found inside the sandbox; is its directory in filesystem.ro?";
            return "interpreter " + plan.interpreter + " cannot be executed (" + outcome.detail +
                   ": " + std::strerror(outcome.error) + ")";
        case Kind::policy_violation:
            return "system call " + outcome.killing_syscall +
                   " is denied by the sandbox policy; the sandbox was killed";
        case Kind::zygote_lost:
            return "the fork server's zygote ended, and this sandbox with it (pysandbox failed, "
                   "not the script)";
        case Kind::lost:
            return "the sandbox was killed from outside" +
                   (outcome.signal != 0 ? " (" + signal_name(outcome.signal) + ")" : "");
    }
    return {};
}

std::vector<std::string> human_notes(const Plan& plan, const Outcome& outcome,
                                     const std::optional<PythonException>& exception) {
    std::vector<std::string> notes;
    if (exception && !exception->hint.empty() && !hit_memory_limit(plan, outcome, exception))
        notes.push_back("hint: " + exception->hint);
    if (std::string files = lost_files_note(plan, outcome); !files.empty())
        notes.push_back(std::move(files));
    if (std::string kept = run_dir_note(plan, outcome); !kept.empty())
        notes.push_back(std::move(kept));
    return notes;
}

namespace {

using json = nlohmann::ordered_json;

json exception_json(const std::optional<PythonException>& exception) {
    if (!exception) return nullptr;
    return {{"type", exception->type},
            {"message", exception->message},
            {"line", exception->line ? json(*exception->line) : json(nullptr)},
            {"traceback", exception->traceback},
            {"summary", exception->summary},
            {"hint", exception->hint.empty() ? json(nullptr) : json(exception->hint)}};
}

// The limit a status reports as a resource violation, if any.
const char* limit_for(Status status) {
    switch (status) {
        case Status::timeout: return "wall_time";
        case Status::memory_limit: return "memory";
        case Status::cpu_limit: return "cpu_time";
        case Status::output_limit: return "output_limit";
        default: return nullptr;
    }
}

json violations_json(const Outcome& outcome, Status status) {
    json violations = blocked_json(outcome);
    if (const char* limit = limit_for(status))
        violations.push_back({{"kind", "resource"},
                              {"what", limit},
                              {"count", 1},
                              {"action", status == Status::output_limit ? "truncated"
                                         : outcome.sandbox_kept         ? "interrupted"
                                                                        : "killed"}});
    return violations;
}

// "skipped" appears only on files --output-dir did not copy, saying why.
json files_json(const std::vector<artifacts::Artifact>& files) {
    json list = json::array();
    for (const auto& file : files) {
        json entry = {{"path", file.path},
                      {"size", file.size},
                      {"sha256", file.sha256 ? json(*file.sha256) : json(nullptr)},
                      {"media_type", file.media_type},
                      {"host_path", file.host_path ? json(*file.host_path) : json(nullptr)}};
        if (!file.skipped.empty()) entry["skipped"] = file.skipped;
        list.push_back(std::move(entry));
    }
    return list;
}

// --trace-syscalls: [{"name", "count", "verdict"}], by name; null without it.
json syscalls_json(const Outcome& outcome) {
    if (!outcome.traced_syscalls) return nullptr;
    json calls = json::array();
    for (const auto& [name, call] : *outcome.traced_syscalls)
        calls.push_back({{"name", name}, {"count", call.count}, {"verdict", call.verdict}});
    return calls;
}

json usage_json(const Outcome& outcome) {
    return {{"wall_ms", outcome.wall.count()},
            {"cpu_ms", outcome.cpu_ms},
            {"max_rss_kib", outcome.max_rss_kib},
            {"setup_ms", outcome.setup.count()},
            {"collect_ms", outcome.collect.count()}};
}

// A stream as a JSON string: text as it is, anything else as base64 (encoding.hpp). `is_text`
// when the capture already knows.
json stream_text(std::string bytes, std::optional<bool> is_text, json& encodings,
                 const char* name) {
    if (is_text ? *is_text : encoding::is_text(bytes)) {
        encodings[name] = "utf-8";
        return json(std::move(bytes));
    }
    encodings[name] = "base64";
    return encoding::base64(bytes);
}

// [["stdout", 120], ["stderr", 45], ...]: the kept bytes in the order they arrived.
json order_json(const std::vector<OutputSegment>& order) {
    json segments = json::array();
    for (const auto& segment : order)
        segments.push_back(
            {segment.channel == OutputSegment::kStdout ? "stdout" : "stderr", segment.length});
    return segments;
}

json limits_json(const Plan& plan) {
    const Limits& limits = plan.profile.limits;
    return {{"wall_time_ms", limits.wall_time.count()},
            {"cpu_time_ms", limits.cpu_time.count()},
            {"memory_bytes", limits.memory},
            {"max_procs", limits.max_procs},
            {"open_files", limits.open_files},
            {"file_size_bytes", limits.file_size},
            {"tmp_size_bytes", limits.tmp_size},
            {"output_limit_bytes", limits.output_limit},
            {"cpus", CPU_COUNT(&plan.affinity)},
            {"network", to_string(plan.profile.network.mode)}};
}

std::string_view audit_hook_state(const Plan& plan, const Outcome& outcome) {
    if (!plan.profile.policy.wants_hook()) return "off";
    return outcome.policy.hook_installed ? "installed" : "not confirmed";
}

// What serves the script under gVisor, and what the host still enforces around runsc itself
// (plan/gvisor.hpp says why each layer is or is not there).
json gvisor_json(const Plan& plan) {
    if (!plan.gvisor) return nullptr;
    return {{"runsc", plan.gvisor->runsc},
            {"platform", gvisor::kPlatform},
            {"inside", {"seccomp", "rlimits", "read_only_root", "network_none"}},
            {"around_runsc",
             {"namespaces", "read_only_root", "tmp_size", "no_new_privs", "seccomp_denylist",
              "cpu_time_watch", "user_counts"}}};
}

json enforcement_json(const Plan& plan, const Outcome& outcome) {
    json degraded = json::array();
    // Under gVisor, Landlock is left out by design (plan/gvisor.hpp), not for want of it.
    if (plan.landlock.abi == 0 && !plan.gvisor) degraded.push_back("landlock");
    if (!plan.cgroup) degraded.push_back("cgroup");
    if (hook_missing(plan, outcome)) degraded.push_back("audit_hook");
    return {{"namespaces", {"user", "mount", "pid", "network", "ipc", "uts", "cgroup"}},
            {"seccomp", plan.profile.seccomp.kill ? "kill" : "errno"},
            {"landlock", plan.landlock.abi > 0 ? json(plan.landlock.abi) : json(false)},
            {"landlock_rights", landlock::handled_rights(plan.landlock)},
            {"no_new_privs", true},
            {"capabilities", json::array()},
            {"resources", plan.cgroup ? "cgroup" : "rlimit"},
            {"audit_hook", audit_hook_state(plan, outcome)},
            {"host_uid", plan.ids.outer_uid},
            {"degraded", degraded},
            {"kernel", to_string(plan.profile.kernel)},
            {"gvisor", gvisor_json(plan)}};
}

json error_json(const Plan& plan, const Outcome& outcome) {
    const char* step = nullptr;
    switch (outcome.kind) {
        case Kind::setup_failed: step = outcome.step.c_str(); break;
        case Kind::exec_failed: step = "execve"; break;
        case Kind::zygote_lost: step = "the fork server's zygote"; break;
        default: return nullptr;
    }
    return {{"message", human_summary(plan, outcome)}, {"step", step}, {"errno", outcome.error}};
}

}  // namespace

json result_json(const Plan& plan, Outcome outcome, int exit_code, std::string_view script_file) {
    const std::optional<PythonException> exception = find_exception(plan, outcome, script_file);
    const Status status = classify(plan, outcome, exception);
    Outcome::Captured output =
        outcome.captured ? std::move(*outcome.captured) : Outcome::Captured{};
    json encodings = json::object();
    json stdout_text =
        stream_text(std::move(output.stdout_text), output.stdout_is_text, encodings, "stdout");
    json stderr_text =
        stream_text(std::move(output.stderr_text), output.stderr_is_text, encodings, "stderr");
    const std::string message = human_summary(plan, outcome, exception);
    const bool exited = outcome.kind == Kind::exited;
    const bool signaled = outcome.kind == Kind::signaled || outcome.kind == Kind::interrupted ||
                          (outcome.kind == Kind::lost && outcome.signal != 0);
    // The streams are moved in after the object is built: nlohmann copies what an initializer
    // list holds, and a stream may be a gigabyte.
    json result = {
        {"schema", kResultSchema},
        {"version", kVersion},
        {"status", to_string(status)},
        {"exit_code", exited ? json(outcome.exit_code) : json(nullptr)},
        {"signal", signaled ? json(signal_name(outcome.signal)) : json(nullptr)},
        {"pysandbox_exit_code", exit_code},
        {"message", message.empty() ? json(nullptr) : json(message)},
        {"stdout", nullptr},
        {"stderr", nullptr},
        {"encoding", std::move(encodings)},
        {"output", order_json(output.order)},
        {"truncated",
         {{"stdout", outcome.stdout_omitted > 0}, {"stderr", outcome.stderr_omitted > 0}}},
        {"bytes", {{"stdout", outcome.stdout_bytes}, {"stderr", outcome.stderr_bytes}}},
        {"exception", exception_json(exception)},
        {"violations", violations_json(outcome, status)},
        {"files", files_json(outcome.files)},
        {"files_omitted", outcome.files_omitted},
        {"syscalls", syscalls_json(outcome)},
        {"usage", usage_json(outcome)},
        {"limits", limits_json(plan)},
        {"enforcement", enforcement_json(plan, outcome)},
        {"profile", plan.profile.name},
        {"error", error_json(plan, outcome)},
        {"warnings", outcome.warnings},
    };
    result["stdout"] = std::move(stdout_text);
    result["stderr"] = std::move(stderr_text);
    return result;
}

json early_error_json(std::string_view message, std::string_view profile) {
    return {{"schema", kResultSchema},
            {"version", kVersion},
            {"status", to_string(Status::sandbox_error)},
            {"exit_code", nullptr},
            {"signal", nullptr},
            {"pysandbox_exit_code", exit_codes::kSandboxError},
            {"message", message},
            {"stdout", ""},
            {"stderr", ""},
            {"encoding", {{"stdout", "utf-8"}, {"stderr", "utf-8"}}},
            {"output", json::array()},
            {"truncated", {{"stdout", false}, {"stderr", false}}},
            {"bytes", {{"stdout", 0}, {"stderr", 0}}},
            {"exception", nullptr},
            {"violations", json::array()},
            {"files", json::array()},
            {"files_omitted", 0},
            {"syscalls", nullptr},
            {"usage", nullptr},
            {"limits", nullptr},
            {"enforcement", nullptr},
            {"profile", profile},
            {"error", {{"message", message}, {"step", nullptr}, {"errno", nullptr}}},
            {"warnings", json::array()}};
}

}  // namespace pysandbox
