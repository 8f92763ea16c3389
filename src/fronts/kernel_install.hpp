#pragma once
// What the statically linked pysandbox binary does for `pysandbox kernel`: exec the kernel program
// (libexec/pysandbox-kernel, kernel.hpp), and `kernel install`, which writes a kernelspec.

#include "fronts/cli.hpp"

namespace pysandbox {

// Replaces this process with the kernel program, given the same arguments. Throws SysError (with
// the program's path) when it cannot be run.
[[noreturn]] void exec_kernel_program(char* const* argv);

// Writes NAME/kernel.json (argv: this binary, "kernel", "-f", "{connection_file}", "-p", PROFILE)
// into the Jupyter kernels directory the invocation names; prints where. Throws UsageError,
// ProfileError, SysError.
int install_kernelspec(const KernelInvocation& invocation);

}  // namespace pysandbox
