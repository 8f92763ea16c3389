#pragma once
// What a run had blocked, one entry per kind and name, each with how often: the system calls the
// seccomp policy denied, the connections the proxy refused, the imports and calls the audit hook
// refused, and a session cell's driver channel muted for flooding. The result's `violations` and
// the incident log's `blocked` both list these.

#include <nlohmann/json.hpp>

#include "report/outcome.hpp"

namespace pysandbox {

// [{"kind": "syscall"|"network"|"import"|"call"|"channel", "what", "count", "action"}], in that
// order.
nlohmann::ordered_json blocked_json(const Outcome& outcome);

}  // namespace pysandbox
