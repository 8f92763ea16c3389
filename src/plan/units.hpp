#pragma once
// Human units for limits, the one grammar of every flag, profile key and request: sizes ("256MiB",
// "64mb", "1G", "512k", "4096") and durations ("5", "0.5", "250ms", "1.5s", "1m30s", "2h"). Pure
// functions; they throw std::invalid_argument with a message that says what would have been
// accepted.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace pysandbox::units {

// Bytes. Units are read case-insensitively, and binary and decimal prefixes alike as powers of
// 1024 ("1G" == "1gb" == "1GiB"), the way ulimit, docker and nsjail users expect memory sizes.
std::uint64_t parse_size(std::string_view text);

// A bare number is seconds; otherwise numbers each followed by ms, s, m (or min) or h, summed.
std::chrono::milliseconds parse_duration(std::string_view text);

// A number of seconds (a request's "timeout": 1.5), checked as parse_duration checks its own.
std::chrono::milliseconds seconds(double value);

// The shortest exact spelling: 268435456 -> "256MiB", 5000ms -> "5s".
std::string format_size(std::uint64_t bytes);
std::string format_duration(std::chrono::milliseconds duration);

}  // namespace pysandbox::units
