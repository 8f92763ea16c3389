#pragma once
// The inside of the sandbox before the interpreter starts: one ordered table of steps (child.cpp).
// Every step is noexcept and returns 0 or -errno; the first failure is reported to the supervisor
// and the child exits. Nothing here throws or decides; the Plan has decided.

#include <cstdarg>
#include <cstddef>

#include "plan.hpp"
#include "report.hpp"

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

// Everything a step may touch. `detail` receives the failing call with its arguments.
struct ChildContext {
    const Plan& plan;
    ChildFds fds;
    int report_fd;  // where the report pipe is now (kReportFd once the other fds are closed)
    char detail[256] = {};
    // plan.font_list's source, opened before the staging root hides the host's /tmp (where a
    // build tree often is).
    int font_list_fd = -1;
    int workdir_fd = -1;  // --workdir's host directory, opened in the sandbox's mount namespace
    int work_upper = -1;  // --workdir's upper layer, until it is sent to the supervisor
};

using StepFn = int (*)(ChildContext&) noexcept;

struct Step {
    const char* name;
    StepFn run;
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
// interpreter's own (pid1.cpp).
const char* child_step_name(int index) noexcept;

// Runs the step table, then becomes the sandbox's init. Never returns.
[[noreturn]] void run_child(const Plan& plan, const ChildFds& fds) noexcept;

// The file descriptor the report pipe occupies once every other descriptor is closed.
inline constexpr int kReportFd = 3;

}  // namespace pysandbox
