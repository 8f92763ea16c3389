#pragma once
// What a run had blocked, one entry per kind and name, each with how often: the system calls the
// seccomp policy denied, the connections the proxy refused, and the imports and calls the audit
// hook refused. The result's `violations` and the incident log's `blocked` both list these.

#include <nlohmann/json.hpp>

#include "report/outcome.hpp"

namespace pysandbox {

// [{"kind": "syscall"|"network"|"import"|"call", "what", "count", "action"}], in that order.
nlohmann::ordered_json blocked_json(const Outcome& outcome);

}  // namespace pysandbox
