#pragma once
// The program a plan runs: the interpreter's command line for inline code, a program on stdin, a
// script (read now, placed read-only at /sandbox/NAME), the analyzer, the cell driver or the
// zygote; and the sandbox's own Python modules, with the bytecode the build prepared. Steps of
// make_plan (plan.hpp).

#include "plan/plan.hpp"
#include "plan/request.hpp"

namespace pysandbox {

// argv, the script's label and file, where the program's text is. Throws UsageError when the
// script or stdin cannot be read.
void add_program(const Program& program, Plan& plan);

// The modules under /sandbox/python that every run has, and those `program` needs.
void add_sandbox_python(const Program& program, Plan& plan);

}  // namespace pysandbox
