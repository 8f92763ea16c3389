#pragma once
// `pysandbox mcp`: a Model Context Protocol server on stdio (JSON-RPC 2.0, one message a line).
// Tools run_python, start_session and end_session (mcp_tools.hpp); each call runs in a session
// (engine/session.hpp) taken from a pool of warm ones (pool.hpp), one pool per profile offered.

#include <string>
#include <vector>

#include "fronts/cli.hpp"

namespace pysandbox {

// Serves until stdin closes (0) or a signal (128 + it). A profile that does not load or options
// that cannot be planned do not stop it: it says why on stderr, answers each tools/call with that
// as a tool error, and exits 125 when stdin closes.
int run_mcp(const McpInvocation& invocation, const std::vector<std::string>& host_env);

}  // namespace pysandbox
