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
// Each record starts with a flag, kControlMore (more follows) or kControlLast (the message's last
// record), and kControlIndexDigits hex digits numbering it within its message (a record sent
// again after an interrupt is taken once); the text follows.
inline constexpr char kControlMore = '+';
inline constexpr char kControlLast = '.';
inline constexpr std::size_t kControlIndexDigits = 8;
inline constexpr std::size_t kControlHeader = 1 + kControlIndexDigits;

// What the cell driver reports of a cell at most: its figures (how many, and their PNG bytes all
// together, before base64) and the characters of its value's repr.
inline constexpr std::size_t kMaxCellFigures = 32;
inline constexpr std::size_t kMaxCellFigureBytes = 16 * 1024 * 1024;
inline constexpr std::size_t kMaxCellValue = 64 * 1024;
// A kernel's cell (fronts/kernel.cpp): the JSON text of its MIME bundles and display() calls
// together, or of a completion or inspection's answer; and the names a completion gives.
inline constexpr std::size_t kMaxCellRich = 8 * 1024 * 1024;
inline constexpr std::size_t kMaxCellMatches = 1000;
// A kernel cell's input() prompt, in bytes of UTF-8 (the driver asks the session for a line).
inline constexpr std::size_t kMaxInputPrompt = 64 * 1024;
// The driver's largest message: a cell's figures in base64 (padded, each), its value, every
// character of it escaped in the worst case (outside the BMP: two JSON escapes, 12 bytes), and
// its rich output, with a record's worth of room for the rest.
inline constexpr std::size_t kMaxControlMessage = 32 * 1024 * 1024;
static_assert(kMaxCellFigureBytes / 3 * 4 + 4 * kMaxCellFigures + 12 * kMaxCellValue +
                  kMaxCellRich + kControlRecord <=
              kMaxControlMessage);

}  // namespace pysandbox
