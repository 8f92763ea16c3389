#pragma once
// A guard in front of toml++ 3.3 (Debian 12). Its is_non_ascii_horizontal_whitespace() reaches
// __builtin_unreachable() -- undefined behaviour -- for most code points in U+00A1..U+0499,
// U+2EAE..U+32A7 and U+FBB6..U+FEFE, and the parser asks that question of a non-ASCII character
// in three places:
//   - wherever it skips or scans code: around keys and values, and across a bare value such as
//     `1979-05-27 07:32:00` (up to 127 characters, quotes and `=` included);
//   - after a backslash in a multi-line basic string ("""...\é""");
//   - at the first character after a line-ending backslash and the whitespace it swallows.
// Outside strings and comments non-ASCII is never valid TOML, and the two string cases are rare
// enough to refuse with a hint, so the guard refuses all three before toml++ reads the text.
// Found by fuzz/profile_fuzz; fuzz/regressions/profile keeps the inputs.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace pysandbox {

struct TomlPrescanError {
    std::size_t line;    // 1-based
    std::size_t column;  // 1-based, in bytes
    std::string message;
};

// The first place in `text` where toml++ 3.3 would meet a non-ASCII character outside the
// parts of a string it reads safely, or nothing. Where its reading of the TOML is unsure (text
// that is not valid TOML anyway) the guard refuses rather than lets toml++ look.
std::optional<TomlPrescanError> prescan_toml(std::string_view text);

}  // namespace pysandbox
