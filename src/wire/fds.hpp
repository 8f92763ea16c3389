#pragma once
// The descriptors the interpreter holds besides 0, 1 and 2, at fixed numbers: the child moves them
// there (inside/child.cpp), the plan names them in the interpreter's command line and environment
// (plan/plan.cpp), and the Python inside (src/python/) reads the same numbers from the generated
// module pysandbox_wire.

#include <cstddef>

namespace pysandbox {

// Init's report socket (wire/report.hpp): records from the child and its init to the supervisor.
inline constexpr int kReportFd = 3;
// The audit hook's records (engine/policy_channel.hpp), where the profile has a [policy].
inline constexpr int kPolicyFd = 4;
// The cell driver's channel (engine/control_channel.hpp), or a zygote's (wire/zygote_protocol.hpp).
inline constexpr int kControlFd = 5;

// The control channel's framing, which the cell driver speaks too: a message is one JSON object,
// its text split into records of at most kControlRecord bytes. Below the default socket buffer
// (net.core.wmem_default, 208 KiB), which bounds one record.
inline constexpr std::size_t kControlRecord = 64 * 1024;
// The driver's largest message: a cell's figures (at most 16 MiB of PNG, in base64) and its value
// (pysandbox_driver.py: MAX_FIGURE_BYTES, MAX_VALUE).
inline constexpr std::size_t kMaxControlMessage = 32 * 1024 * 1024;

}  // namespace pysandbox
