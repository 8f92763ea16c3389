// The guard in front of toml++ 3.3: non-ASCII where toml++ would misread it is refused with a
// line and column; everywhere TOML allows it, the text goes on to toml++ and parses. Under the
// sanitizer build the accepted texts also prove toml++ reaches no undefined behaviour on them.

#include <doctest/doctest.h>

#include <toml++/toml.h>
#include <string>

#include "toml_prescan.hpp"

namespace {

// "(accepted)" or "LINE:COL: message".
std::string prescan(const std::string& text) {
    auto error = pysandbox::prescan_toml(text);
    if (!error) return "(accepted)";
    return std::to_string(error->line) + ":" + std::to_string(error->column) + ": " +
           error->message;
}

bool parses(const std::string& text) {
    try {
        (void)toml::parse(text);
        return true;
    } catch (const toml::parse_error&) {
        return false;
    }
}

const std::string kE = "\xc3\xa9";  // é, U+00E9: one of the code points toml++ 3.3 trips on
const std::string kOutside = "a non-ASCII character outside a string or a comment";
const std::string kAfterBackslash =
    "a non-ASCII character right after a backslash in a string (write it as \\uXXXX)";

}  // namespace

TEST_SUITE("toml_prescan") {
    TEST_CASE("non-ASCII in strings, quoted keys and comments goes on to toml++") {
        const std::string valid[] = {
            "# caf" + kE + "\n",
            "a = \"" + kE + "\" # " + kE + "\n",
            "a = '" + kE + "'\n",
            "a = \"\"\"\n" + kE + "\n\"\"\"\n",
            "a = '''" + kE + "'''\n",
            "a = \"\"\"x\"\"\"\"\nb = \"" + kE + "\"\n",  // four quotes: one is content
            "\"" + kE + "\" = 1\n",
            "[a.\"" + kE + "\"]\nb = 1\n",
            "[[a.'" + kE + "']]\n",
            "t = { b.\"" + kE + "\" = 1, c = [\"" + kE + "\"] }\n",
            "a = [\n  # " + kE + "\n  1979-05-27, \"" + kE + "\",\n  '" + kE + "',\n]\n",
            "a = [[1, 2], [\"" + kE + "\"]]\n",
            "a = \"\\\\" + kE + "\"\n",                // an escaped backslash, then é
            "a = \"\"\"x \\\n   y" + kE + "\"\"\"\n",  // é after the swallowed whitespace
            "a = \"\\\"" + kE + "\"\n",                // an escaped quote does not close
            "a = 1979-05-27 07:32:00 # " + kE + "\n",  // a date with a space, then a comment
            "a = true#" + kE + "\n",
            "a = {}\nb = \"" + kE + "\"\n",
            "a = []\nb = \"" + kE + "\"\n",
        };
        for (const auto& text : valid) {
            CAPTURE(text);
            CHECK(prescan(text) == "(accepted)");
            CHECK(parses(text));
        }
    }

    TEST_CASE("non-ASCII in code is refused where it is") {
        CHECK(prescan("x = 1 " + kE + "\n") == "1:7: " + kOutside);
        CHECK(prescan(kE) == "1:1: " + kOutside);
        CHECK(prescan("\xef\xbb\xbf"
                      "a = 1\n") == "1:1: " + kOutside);  // a BOM too
        CHECK(prescan("a = \"\"\"x\"\"\"\"\n" + kE + " = 1\n") == "2:1: " + kOutside);
        CHECK(prescan("a = \"x\"\n" + kE + "\n") == "2:1: " + kOutside);
    }

    TEST_CASE("inside a bare value a quote opens no string") {
        // toml++ scans a bare value up to a value terminator, across quotes and '='.
        CHECK(prescan("x =1\"" + kE + "\"\n") == "1:6: " + kOutside);
        // fuzz/regressions/profile/bare-value-scans-past-quote-and-equals.toml
        CHECK(prescan(std::string("[rk]\ne  =8\"@\0\0@=\"\x01\0\0\0\0\xef\xbb\xb7\"\n@", 28)) ==
              "2:18: " + kOutside);
        // After a date toml++ reads on past one space for the time.
        CHECK(prescan("a = 1979-05-27 \"" + kE + "\"\n") == "1:17: " + kOutside);
        // Whatever follows a finished value, other than a separator, is read as code.
        CHECK(prescan("a = \"x\" \"" + kE + "\"\n") == "1:10: " + kOutside);
        CHECK(prescan("a = [1 \"" + kE + "\"]\n") == "1:9: " + kOutside);
    }

    TEST_CASE("non-ASCII right after a backslash in a basic string is refused") {
        CHECK(prescan("a = \"\"\"\\" + kE + "\"\"\"\n") == "1:9: " + kAfterBackslash);
        CHECK(prescan("a = \"\\" + kE + "\"\n") == "1:7: " + kAfterBackslash);
        // A line-ending backslash swallows blanks and newlines; the first character after them
        // must be ASCII.
        CHECK(prescan("a = \"\"\"x\\\n\n   " + kE + "\"\"\"\n") == "3:4: " + kAfterBackslash);
        CHECK(prescan("a = \"\"\"x\\  \r\n" + kE + "\"\"\"\n") == "2:1: " + kAfterBackslash);
        // Literal strings have no escapes.
        CHECK(prescan("a = '''x\\\n" + kE + "'''\n") == "(accepted)");
    }
}
