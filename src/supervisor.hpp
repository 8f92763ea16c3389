#pragma once
// The supervisor: clones the sandbox into fresh namespaces, writes its id maps, releases it, and
// watches it in one poll loop (pidfd, deadline timer, signals, the child's reports, denied system
// calls, the audit hook's channel, the output pipes) until nothing of it is left. It returns what
// it saw and the resources collection needs; what the run left behind is collect.hpp's business.

#include <cstdint>
#include <memory>

#include "cgroup.hpp"
#include "outcome.hpp"
#include "plan.hpp"
#include "proxy.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox {

struct Supervised {
    Outcome outcome;         // how it ended, output, usage, denied calls, the hook's records
    sys::UniqueFd work_dir;  // the sandbox's /tmp/work, handed over during setup
    std::unique_ptr<proxy::Proxy> proxy;        // network mode "proxy", once it was opened
    std::unique_ptr<cgroup::RunCgroup> cgroup;  // when memory and processes had one
    std::int64_t start_realtime_ns = 0;         // CLOCK_REALTIME before the sandbox started
};

// Runs the plan's sandbox to its end. Throws UserNamespaceError or SysError when the sandbox
// cannot even be created (clone3, id maps); everything after that is in the Outcome.
Supervised supervise(const Plan& plan);

}  // namespace pysandbox
