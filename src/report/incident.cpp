#include "report/incident.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "report/json_text.hpp"
#include "report/violations.hpp"
#include "sys/sha256.hpp"

namespace pysandbox::incident {
namespace {

using json = nlohmann::ordered_json;

// "2026-12-02T17:04:05.123Z"
std::string utc_now() {
    using namespace std::chrono;
    const auto now = system_clock::now();
    const std::time_t seconds = system_clock::to_time_t(now);
    const auto millis = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm utc{};
    ::gmtime_r(&seconds, &utc);
    char text[32];
    const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
    std::snprintf(text + n, sizeof text - n, ".%03lldZ", static_cast<long long>(millis));
    return text;
}

}  // namespace

json head(const Plan& plan, std::string_view command) {
    return {{"schema", kSchema},           {"time", utc_now()},
            {"command", command},          {"profile", plan.profile.name},
            {"script", plan.script_label}, {"script_sha256", plan.script_sha256()}};
}

json run_entry(const Plan& plan, const Outcome& outcome) {
    json blocked = blocked_json(outcome);
    if (blocked.empty()) return nullptr;
    json entry = head(plan, "run");
    // The exit, not the status: without --json the output is not kept, so an exception cannot
    // be told from an error, and the log must say the same whatever the caller asked for.
    entry["exit_code"] =
        outcome.kind == Outcome::Kind::exited ? json(outcome.exit_code) : json(nullptr);
    entry["signal"] = outcome.kind == Outcome::Kind::exited || outcome.signal == 0
                          ? json(nullptr)
                          : json(signal_name(outcome.signal));
    entry["blocked"] = std::move(blocked);
    return entry;
}

json cell_entry(const Plan& plan, const Outcome& outcome, std::string_view script,
                std::string_view code) {
    json entry = run_entry(plan, outcome);
    if (entry.is_null()) return entry;
    entry["command"] = "session";
    entry["script"] = script;
    entry["script_sha256"] = Sha256::of(code);
    return entry;
}

std::string append(const Plan& plan, const json& entry) {
    if (!plan.incident_log) return {};
    const std::string line = dump_line(entry) + "\n";
    ssize_t written;
    do {
        written = ::write(plan.incident_log.get(), line.data(), line.size());
    } while (written < 0 && errno == EINTR);
    if (written == static_cast<ssize_t>(line.size())) return {};
    const std::string why = written < 0 ? std::strerror(errno) : "short write";
    return "cannot append to the incident log " + plan.incident_log_path + ": " + why;
}

}  // namespace pysandbox::incident
