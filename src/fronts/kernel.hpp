#pragma once
// `pysandbox kernel`: a Jupyter kernel (messaging protocol 5.3, over ZeroMQ) whose cells run in one
// session (engine/session.hpp) under every layer of `run`. It lives in the kernel program
// (kernel_main.cpp), linked dynamically with Debian's libzmq; the pysandbox binary, linked
// statically, execs that program (kernel_install.hpp) and writes the kernelspec itself.

#include <string>
#include <vector>

#include "fronts/cli.hpp"

namespace pysandbox {

// Serves the client of the connection file until a shutdown_request or a stop signal. Throws
// UsageError for a bad connection file, ProfileError, SysError.
int run_kernel(const KernelInvocation& invocation, const std::vector<std::string>& host_env);

}  // namespace pysandbox
