#pragma once
// Human units for limits: sizes ("256MiB", "1G", "512k", "4096") and durations ("5s", "250ms",
// "2m", "1.5s"). Pure functions; they throw std::invalid_argument with a message that says what
// would have been accepted.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace pysandbox::units {

// Bytes. Binary and decimal prefixes are both read as powers of 1024 ("1G" == "1GiB"), the way
// ulimit, docker and nsjail users expect memory sizes.
std::uint64_t parse_size(std::string_view text);

std::chrono::milliseconds parse_duration(std::string_view text);

// The shortest exact spelling: 268435456 -> "256MiB", 5000ms -> "5s".
std::string format_size(std::uint64_t bytes);
std::string format_duration(std::chrono::milliseconds duration);

}  // namespace pysandbox::units
