#pragma once
// ASCII case folding for protocol text (host names, HTTP tokens): locale-independent, byte by byte.

#include <algorithm>
#include <string>
#include <string_view>

namespace pysandbox::ascii {

inline char lower(char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

inline std::string lowercase(std::string_view text) {
    std::string out(text);
    std::ranges::transform(out, out.begin(), lower);
    return out;
}

inline bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           std::ranges::equal(a, b, [](char x, char y) { return lower(x) == lower(y); });
}

inline bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

inline bool is_all_digits(std::string_view text) {
    return !text.empty() && std::ranges::all_of(text, is_digit);
}

}  // namespace pysandbox::ascii
