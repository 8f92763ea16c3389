#pragma once
// The inside of the sandbox before the interpreter starts: one ordered table of steps (child.cpp).
// Every step is noexcept and returns 0 or -errno; the first failure is reported to the supervisor
// and the child exits. Nothing here throws or decides; the Plan has decided.

#include <cstdarg>
#include <cstddef>

#include "plan/plan.hpp"
#include "wire/fds.hpp"
#include "wire/report.hpp"

namespace pysandbox {

struct ChildFds {
    int release_read;  // EOF or one byte from the supervisor: the id maps are written
    int report_write;  // Report records to the supervisor
    int stdin_read;
    int stdout_write;
    int stderr_write;
    int policy_write;  // the audit hook's records, at kPolicyFd in the interpreter
                       // (policy_channel.hpp); -1 without a [policy]
    int control;       // the cell driver's channel, at kControlFd in the interpreter
                       // (control_channel.hpp); -1 for other programs
};

// How a sandbox comes to be. Cloned by pysandbox: it builds a root of its own and pivots into it.
// Forked by a zygote (zygote.hpp): a zygote is itself a cloned sandbox, whose root, /dev and
// synthetic files every job it forks already shares; the job builds the rest (its own /tmp, /proc,
// /dev/shm, hostname, layers) on that root, in place.
enum class Birth : unsigned { cloned = 1, forked = 2 };

// Everything a step may touch. `detail` receives the failing call with its arguments.
struct ChildContext {
    const Plan& plan;
    ChildFds fds;
    int report_fd;  // where the report socket is now (kReportFd once the other fds are closed)
    Birth birth = Birth::cloned;
    char detail[256] = {};
    // plan.font_list's source, opened before the staging root hides the host's /tmp (where a
    // build tree often is); a forked job's zygote holds its own copy open.
    int font_list_fd = -1;
    int zygote_pidfd = -1;  // a forked job's zygote: alive when the job arms its death signal
    int workdir_fd = -1;    // --workdir's host directory, opened in the sandbox's mount namespace
    int packages_fd = -1;   // plan.packages_dir, opened before the staging root covers /tmp
    int work_upper = -1;    // --workdir's upper layer, until it is sent to the supervisor
};

using StepFn = int (*)(ChildContext&) noexcept;

struct Step {
    const char* name;
    StepFn run;
    // Which births run it: both unless the step builds (or needs) what a zygote's root has.
    unsigned births = static_cast<unsigned>(Birth::cloned) | static_cast<unsigned>(Birth::forked);
};

// Records the failing call (printf-style) in ctx.detail and returns -errno (errno as it was).
int step_fail(ChildContext& ctx, const char* format, ...) noexcept
    __attribute__((format(printf, 2, 3)));

// Reports the failure of step `index` (errno `error`, the call in ctx.detail) to the supervisor
// and exits with the exit-code constant that fits `kind`. The child, its init and the
// interpreter's process all fail this one way.
[[noreturn]] void fail_step(const ChildContext& ctx, ReportKind kind, int index,
                            int error) noexcept;

// The step tables' names, for the supervisor's messages: the child's steps (child.cpp), then the
// interpreter's own (init.cpp).
const char* child_step_name(int index) noexcept;

// The births (Birth bits) that run the child's step `index`, 0 past the child's last step: for
// the tests of the table's order and of the steps a forked job skips.
unsigned child_step_births(int index) noexcept;

// Runs the step table, then becomes the sandbox's init. Never returns.
[[noreturn]] void run_child(const Plan& plan, const ChildFds& fds) noexcept;

// A zygote's job (Birth::forked), in the process the zygote just forked into new namespaces:
// runs the step table's forked steps, then starts the job's init, and returns only in the
// interpreter's own process (PID 2), with every layer in place and seccomp loaded: the zygote's
// interpreter goes on there as the job's. A failed step is reported and the process exits.
void run_forked_child(const Plan& plan, const ChildFds& fds, int font_list_fd,
                      int zygote_pidfd) noexcept;

}  // namespace pysandbox
