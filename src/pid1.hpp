#pragma once
// The sandbox's init: PID 1 of the new PID namespace. It starts the interpreter as PID 2, reaps
// every process, forwards the supervisor's signals, and when the interpreter ends kills whatever
// it left behind and reports the interpreter's wait status.

#include "child.hpp"

namespace pysandbox::pid1 {

[[noreturn]] void run_init(ChildContext& ctx) noexcept;

}  // namespace pysandbox::pid1
