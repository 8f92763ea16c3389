#include "fronts/check.hpp"

#include <iostream>

#include <nlohmann/json.hpp>

#include "engine/execute.hpp"
#include "plan/env_store.hpp"
#include "plan/host_files.hpp"
#include "plan/plan.hpp"
#include "plan/profile.hpp"
#include "report/exit_codes.hpp"
#include "report/incident.hpp"
#include "report/json_text.hpp"
#include "report/result.hpp"

namespace pysandbox::check {
namespace {

using json = nlohmann::ordered_json;

// The analyzer's findings, or a message saying why there are none to trust.
struct Analysis {
    json findings = json::array();
    std::uint64_t omitted = 0;  // findings past the analyzer's first 500
    std::string error;
};

Analysis read_analysis(const Plan& plan, const Outcome& outcome) {
    const std::string out = outcome.captured ? outcome.captured->stdout_text : "";
    json parsed = json::parse(out, nullptr, false);
    if (outcome.kind == Outcome::Kind::exited && outcome.exit_code == 0 && parsed.is_object() &&
        parsed.contains("findings") && parsed["findings"].is_array())
        return {parsed["findings"], parsed.value("omitted", std::uint64_t{0}), ""};
    std::string why = human_summary(plan, outcome);
    // An analyzer that ended on its own (in a traceback, or with a status) says why on stderr.
    if ((why.empty() || outcome.kind == Outcome::Kind::exited) && outcome.captured &&
        !outcome.captured->stderr_text.empty())
        why = outcome.captured->stderr_text;
    return {json::array(), 0, "the analysis failed: " + (why.empty() ? "no result" : why)};
}

void print_human(const std::string& script, const Analysis& analysis) {
    for (const auto& f : analysis.findings)
        std::cout << script << ":" << f.value("line", 0) << ":" << f.value("col", 0) << ": "
                  << f.value("rule", "") << ": " << f.value("message", "") << "\n";
    if (analysis.omitted > 0)
        std::cout << script << ": " << analysis.omitted << " more findings not shown\n";
    if (!analysis.error.empty()) std::cerr << "pysandbox: " << analysis.error << "\n";
}

// Denied imports and calls are incidents; a syntax error is a finding but not one.
void log_incident(const Plan& plan, const Analysis& analysis) {
    json blocked = json::array();
    for (const auto& f : analysis.findings) {
        const std::string rule = f.value("rule", "");
        if (rule != "denied-import" && rule != "denied-call") continue;
        blocked.push_back({{"kind", rule == "denied-import" ? "import" : "call"},
                           {"what", f.value("name", "")},
                           {"line", f.value("line", 0)},
                           {"col", f.value("col", 0)}});
    }
    if (blocked.empty()) return;
    json entry = incident::head(plan, "check");
    entry["blocked"] = std::move(blocked);
    if (std::string problem = incident::append(plan, entry); !problem.empty())
        std::cerr << "pysandbox: warning: " << problem << "\n";
}

constexpr std::uint64_t kMaxScript = 16ULL << 20;  // as much of the script as run reads for it

json result(std::string_view status, const json& findings, std::uint64_t omitted) {
    return {{"schema", kSchema}, {"status", status}, {"findings", findings}, {"omitted", omitted}};
}

}  // namespace

int run(const CheckInvocation& options, const std::vector<std::string>& host_env) {
    Profile profile = load_profile(options.profile, profile_search_dirs());
    // The script's inline metadata (PEP 723), read as `run` reads it: a malformed block is the
    // same usage error here, before anything runs.
    if (const HostFile text = read_host_file(options.script, kMaxScript);
        text.problem == HostFile::Problem::none)
        env_store::inline_dependencies(text.data, options.script);
    Request request;
    request.program = {Program::Kind::check, options.script, {}};
    request.overrides.incident_log = options.incident_log;
    request.overrides.kernel = options.kernel;
    std::unique_ptr<const Plan> plan = make_plan(std::move(profile), request, host_env);
    const Analysis analysis = read_analysis(*plan, execute(*plan));
    log_incident(*plan, analysis);
    const bool clean = analysis.findings.empty();
    if (options.json) {
        json out = result(!analysis.error.empty() ? "error"
                          : clean                 ? "clean"
                                                  : "findings",
                          analysis.findings, analysis.omitted);
        if (!analysis.error.empty()) out["error"] = analysis.error;
        std::cout << dump_line(out) << std::endl;
    } else {
        print_human(options.script, analysis);
    }
    if (!analysis.error.empty()) return exit_codes::kSandboxError;
    return clean ? 0 : 1;
}

std::string error_json(std::string_view message) {
    json out = result("error", json::array(), 0);
    out["error"] = message;
    return dump_line(out);
}

}  // namespace pysandbox::check
