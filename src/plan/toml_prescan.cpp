#include "plan/toml_prescan.hpp"

#include <vector>

namespace pysandbox {
namespace {

constexpr const char* kOutsideString = "a non-ASCII character outside a string or a comment";
constexpr const char* kAfterBackslash =
    "a non-ASCII character right after a backslash in a string (write it as \\uXXXX)";
constexpr const char* kAfterLineEnding =
    "a non-ASCII character first after a line-ending backslash (write it as \\uXXXX)";

bool is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\r';
}
bool is_ascii(char c) {
    return static_cast<unsigned char>(c) < 0x80;
}

std::size_t quote_run(std::string_view text, std::size_t i) {
    std::size_t n = 0;
    while (i + n < text.size() && text[i + n] == text[i]) ++n;
    return n;
}

// Reads TOML the way toml++ does, one byte at a time, as far as needed to know whether a byte
// is in code, a comment or a string. Code is where toml++ expects a key, a value, or what may
// follow a value; inside a bare value (a number, a date, a boolean) it scans across anything up
// to a value terminator, so a quote there opens no string.
class Prescanner {
  public:
    std::optional<TomlPrescanError> run(std::string_view text) {
        for (std::size_t i = 0; i < text.size(); ++i) {
            std::size_t skip = 0;  // bytes consumed beyond text[i]; never a newline
            if (const char* problem = step(text, i, skip))
                return TomlPrescanError{line_, i - line_start_ + 1, problem};
            i += skip;
            if (text[i] == '\n') {
                ++line_;
                line_start_ = i + 1;
            }
        }
        return std::nullopt;
    }

  private:
    enum class Region { code, comment, basic, literal, multiline_basic, multiline_literal };
    // Where in code: a key (or table header) is read, a value is expected, a bare value is
    // being scanned, or a value has ended.
    enum class Code { key, value, bare_value, after_value };

    const char* step(std::string_view text, std::size_t i, std::size_t& skip) {
        const char c = text[i];
        switch (region_) {
            case Region::code: return in_code(text, i, skip);
            case Region::comment:
                if (c == '\n') end_region_at_newline();
                return nullptr;
            case Region::basic:
            case Region::multiline_basic: return in_basic(text, i, skip);
            case Region::literal:
                if (c == '\'')
                    end_region(after_string_);
                else if (c == '\n')
                    end_region_at_newline();
                return nullptr;
            case Region::multiline_literal:
                skip = at_multiline_quote(text, i, '\'');
                return nullptr;
        }
        return nullptr;
    }

    const char* in_code(std::string_view text, std::size_t i, std::size_t& skip) {
        const char c = text[i];
        if (!is_ascii(c)) return kOutsideString;
        if (c == '\n') {
            at_newline();
            return nullptr;
        }
        if (c == '#') {
            region_ = Region::comment;
            return nullptr;
        }
        if (is_blank(c)) {
            if (code_ == Code::bare_value) code_ = Code::after_value;
            return nullptr;
        }
        switch (code_) {
            case Code::key:
                if (c == '"' || c == '\'')
                    skip = open_string(text, i, Code::key);
                else if (c == '=')
                    code_ = Code::value;
                else if (c == '}')
                    close_nesting();  // {}
                return nullptr;
            case Code::value:
                if (c == '"' || c == '\'') {
                    skip = open_string(text, i, Code::after_value);
                } else if (c == '[' || c == '{') {
                    nesting_.push_back(c);
                    code_ = c == '[' ? Code::value : Code::key;
                } else if (c == ']' || c == '}') {
                    close_nesting();  // [] or a trailing comma
                } else if (c != ',') {
                    code_ = Code::bare_value;
                }
                return nullptr;
            case Code::bare_value:
            case Code::after_value:
                // After a value only a separator or a closing bracket is TOML; anything else
                // is scanned like a bare value (toml++ reads on past a date's space).
                if (c == ',')
                    code_ = !nesting_.empty() && nesting_.back() == '[' ? Code::value : Code::key;
                else if (c == ']' || c == '}')
                    close_nesting();
                else
                    code_ = Code::bare_value;
                return nullptr;
        }
        return nullptr;
    }

    const char* in_basic(std::string_view text, std::size_t i, std::size_t& skip) {
        const char c = text[i];
        const bool multiline = region_ == Region::multiline_basic;
        if (escaped_) {
            escaped_ = false;
            // Only a multi-line string asks whether the escaped character is whitespace; in a
            // one-line string toml++ reports an unknown escape itself.
            if (multiline && !is_ascii(c)) return kAfterBackslash;
            if (multiline && (is_blank(c) || c == '\n')) {
                line_ending_ = true;  // a line-ending backslash swallows what follows
                return nullptr;
            }
            if (c != '\n') return nullptr;  // the escaped character
        }
        if (line_ending_) {
            if (is_blank(c) || c == '\n') return nullptr;
            line_ending_ = false;
            if (!is_ascii(c)) return kAfterLineEnding;
        }
        if (c == '\\') {
            escaped_ = true;
        } else if (multiline) {
            skip = at_multiline_quote(text, i, '"');
        } else if (c == '"') {
            end_region(after_string_);
        } else if (c == '\n') {
            end_region_at_newline();
        }
        return nullptr;
    }

    // At text[i] inside a multi-line string: the closing delimiter is the last three of a run
    // of up to five quotes. Returns the quotes consumed beyond text[i].
    std::size_t at_multiline_quote(std::string_view text, std::size_t i, char quote) {
        if (text[i] != quote) return 0;
        const std::size_t run = quote_run(text, i);
        if (run >= 3) end_region(after_string_);
        return run - 1;
    }

    std::size_t open_string(std::string_view text, std::size_t i, Code after) {
        const std::size_t run = quote_run(text, i);
        const bool basic = text[i] == '"';
        after_string_ = after;
        if (run == 2) {  // an empty string
            code_ = after;
            return 1;
        }
        if (run >= 3) {
            region_ = basic ? Region::multiline_basic : Region::multiline_literal;
            return 2;
        }
        region_ = basic ? Region::basic : Region::literal;
        return 0;
    }

    void end_region(Code then) {
        region_ = Region::code;
        code_ = then;
    }

    // A comment or an unterminated one-line string ends at a newline, which is then code's.
    void end_region_at_newline() {
        end_region(region_ == Region::comment ? code_ : after_string_);
        at_newline();
    }

    void at_newline() {
        if (nesting_.empty())
            code_ = Code::key;
        else if (code_ == Code::bare_value)
            code_ = Code::after_value;
    }

    void close_nesting() {
        if (!nesting_.empty()) nesting_.pop_back();
        code_ = Code::after_value;
    }

    Region region_ = Region::code;
    Code code_ = Code::key;
    Code after_string_ = Code::after_value;
    std::vector<char> nesting_;  // open '[' (arrays) and '{' (inline tables)
    bool escaped_ = false;       // the previous byte was a backslash in a basic string
    bool line_ending_ = false;   // after a line-ending backslash in a multi-line basic string
    std::size_t line_ = 1;
    std::size_t line_start_ = 0;
};

}  // namespace

std::optional<TomlPrescanError> prescan_toml(std::string_view text) {
    return Prescanner().run(text);
}

}  // namespace pysandbox
