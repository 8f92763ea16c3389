#include "result.hpp"

#include <signal.h>

#include <cerrno>
#include <cstring>

#include "units.hpp"

namespace pysandbox {

std::string signal_name(int sig) {
    const char* abbrev = ::sigabbrev_np(sig);
    return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

namespace {

std::string blocked_summary(const Outcome& outcome) {
    if (outcome.blocked_syscalls.empty()) return {};
    std::string calls;
    std::uint64_t total = 0;
    for (const auto& [name, count] : outcome.blocked_syscalls) {
        calls += (calls.empty() ? "" : ", ") + name + (count > 1 ? " x" + std::to_string(count) : "");
        total += count;
    }
    return "the sandbox policy denied " + std::to_string(total) + " system call" +
           (total > 1 ? "s" : "") + ": " + calls;
}

std::string output_summary(const Plan& plan, const Outcome& outcome) {
    std::uint64_t omitted = outcome.stdout_omitted + outcome.stderr_omitted;
    if (omitted == 0) return {};
    return "output limit of " + units::format_size(plan.profile.limits.output_limit) +
           " reached; " + std::to_string(omitted) + " bytes omitted from the middle";
}

std::string join(const std::string& a, const std::string& b) {
    if (a.empty() || b.empty()) return a + b;
    return a + "\npysandbox: " + b;
}

}  // namespace

std::string human_summary(const Plan& plan, const Outcome& outcome) {
    const Limits& limits = plan.profile.limits;
    using Kind = Outcome::Kind;
    switch (outcome.kind) {
        case Kind::exited: return join(output_summary(plan, outcome), blocked_summary(outcome));
        case Kind::signaled:
            if (outcome.signal == SIGXCPU)
                return "CPU time limit of " + units::format_duration(limits.cpu_time) +
                       " reached; the script was killed";
            return join(output_summary(plan, outcome), blocked_summary(outcome));
        case Kind::timeout:
            return "wall-clock limit of " + units::format_duration(limits.wall_time) +
                   " reached; the sandbox was killed";
        case Kind::interrupted:
            return "interrupted by " + signal_name(outcome.signal) + "; the sandbox was stopped";
        case Kind::setup_failed:
            return "sandbox setup failed at step \"" + outcome.step + "\": " + outcome.detail +
                   ": " + std::strerror(outcome.error) + "; the script was not run";
        case Kind::exec_failed:
            if (outcome.error == ENOENT || outcome.error == ENOTDIR)
                return "interpreter " + plan.interpreter +
                       " not found inside the sandbox; is its directory in filesystem.ro?";
            return "interpreter " + plan.interpreter + " cannot be executed (" + outcome.detail +
                   ": " + std::strerror(outcome.error) + ")";
        case Kind::policy_violation:
            return "system call " + outcome.killing_syscall +
                   " is denied by the sandbox policy; the sandbox was killed";
        case Kind::lost:
            return "the sandbox was killed from outside" +
                   (outcome.signal != 0 ? " (" + signal_name(outcome.signal) + ")" : "");
    }
    return {};
}

}  // namespace pysandbox
