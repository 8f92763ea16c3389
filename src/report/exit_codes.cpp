#include "report/exit_codes.hpp"

#include <signal.h>

#include <cerrno>

namespace pysandbox::exit_codes {

int for_outcome(const Outcome& outcome) {
    using Kind = Outcome::Kind;
    switch (outcome.kind) {
        case Kind::exited: return outcome.exit_code;
        case Kind::signaled:
        case Kind::interrupted: return kSignalBase + outcome.signal;
        case Kind::timeout: return kTimeout;
        case Kind::setup_failed:
        case Kind::zygote_lost: return kSandboxError;
        case Kind::exec_failed:
            return outcome.error == ENOENT || outcome.error == ENOTDIR ? kNotFound : kNotExecutable;
        case Kind::policy_violation: return kSignalBase + SIGSYS;
        case Kind::lost: return outcome.signal != 0 ? kSignalBase + outcome.signal : kSandboxError;
    }
    return kSandboxError;
}

}  // namespace pysandbox::exit_codes
