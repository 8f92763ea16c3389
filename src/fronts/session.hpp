#pragma once
// `pysandbox session`: a Session (engine/session.hpp) driven by NDJSON requests on stdin, one
// result line per request on stdout and nothing else there; or, when stdin is a terminal, a small
// REPL.

#include <string>
#include <vector>

#include "fronts/cli.hpp"

namespace pysandbox {

// Runs the session to its end: stdin closed (0), the idle timeout or the lifetime (0), a signal
// (128 + it). When the first sandbox cannot start: its error on stderr and the exit code `run`
// would give (125, 126, 127). Throws what make_plan throws, UserNamespaceError and SysError.
int run_session(const SessionInvocation& invocation, const std::vector<std::string>& host_env);

}  // namespace pysandbox
