#pragma once
// The sandbox's init: PID 1 of the new PID namespace. It starts the interpreter as PID 2, reaps
// every process, forwards the supervisor's signals, and when the interpreter ends kills whatever
// it left behind and reports the interpreter's wait status.

#include "inside/child.hpp"

namespace pysandbox::init {

// Becomes the init. The interpreter's own steps are numbered from `first_step` on in reports.
[[noreturn]] void run_init(ChildContext& ctx, int first_step) noexcept;

// The same, for a forked job (child.hpp, run_forked_child): init forks the interpreter's process
// and never returns; this returns in that process with its steps done (resource limits, seccomp)
// but the execve: the zygote's interpreter goes on as the job's.
void start_interpreter(ChildContext& ctx, int first_step) noexcept;

// The name of the interpreter's step `index` (0 is the first), or nullptr.
const char* interpreter_step_name(int index) noexcept;

}  // namespace pysandbox::init
