#pragma once
// Counting what a script had blocked without letting it grow pysandbox: at most kMaxDistinct
// names are kept, each with how often; past that, the times are counted under one `others` key.
// A script that tries a new name every millisecond leaves a map of kMaxDistinct + 1 entries.

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>

namespace pysandbox {

inline constexpr std::size_t kMaxDistinct = 100;

template <typename Key>
void count_bounded(std::map<Key, std::uint64_t>& counts, Key key, Key others) {
    if (counts.size() >= kMaxDistinct && !counts.contains(key)) key = std::move(others);
    ++counts[std::move(key)];
}

}  // namespace pysandbox
