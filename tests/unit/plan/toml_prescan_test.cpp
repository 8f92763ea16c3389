// The guard in front of toml++ 3.3 (src/plan/toml_prescan.hpp), which names three places where
// toml++ reaches __builtin_unreachable() on a non-ASCII character: [code], [escape], [line-ending].
// Each has two tests, which fail for opposite reasons:
//
//   "guard [X]: ..."  the guard refuses X's inputs with line:column, through prescan_toml() and
//       through load_profile_text(), the way profiles are read. They fail when the guard is
//       removed or loses X: in the normal build by toml++'s different answer, in the sanitizer
//       build also by UBSan stopping the run inside toml++.
//   "toml++ 3.3 defect [X]: ..."  toml++ itself, unguarded, still reaches
//       __builtin_unreachable() on X's minimal input. It runs in a child process,
//       bin/toml_defect_probe, built to trap there (SIGILL) in every build: in this process the
//       undefined behaviour would pass unseen in the normal build (toml++ 3.3 -O2 answers like a
//       correct parser) and stop the whole run under UBSan. They fail when the installed toml++
//       is fixed, and say so: then the guard can go, all of it (see its header).
//
// The probe is checked too: on the same inputs with a non-ASCII character toml++ reads safely
// (一, U+4E00) it exits normally, so a trap means the defect, not the probe. The first test case
// checks the other side: non-ASCII where TOML allows it passes the guard and parses (in the
// sanitizer build that also proves toml++ reaches no undefined behaviour on it).

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <toml++/toml.h>
#include <string>

#include "plan/profile.hpp"
#include "plan/toml_prescan.hpp"
#include "sys/errors.hpp"
#include "test_support.hpp"

namespace {

// "(accepted)" or "LINE:COL: message".
std::string prescan(const std::string& text) {
    auto error = pysandbox::prescan_toml(text);
    if (!error) return "(accepted)";
    return std::to_string(error->line) + ":" + std::to_string(error->column) + ": " +
           error->message;
}

// What reading `text` as a profile says: the ProfileError's message.
std::string load_error(const std::string& text) {
    return pysandbox::test::message_of<pysandbox::ProfileError>(
        [&] { pysandbox::load_profile_text(text, "inline.toml", {}); });
}

bool parses(const std::string& text) {
    try {
        (void)toml::parse(text);
        return true;
    } catch (const toml::parse_error&) {
        return false;
    }
}

// toml++ on `text` with no guard, in bin/toml_defect_probe: "unreachable" when it reached
// __builtin_unreachable() (the probe trapped), else "exit 0" (parsed), "exit 1: LINE:COL: what
// toml++ said", or how else the probe ended.
std::string unguarded(const std::string& text) {
    const int input = memfd_create("toml", MFD_CLOEXEC);
    REQUIRE(input >= 0);
    REQUIRE(write(input, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    REQUIRE(lseek(input, 0, SEEK_SET) == 0);
    int output[2];
    REQUIRE(pipe2(output, O_CLOEXEC) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(input, STDIN_FILENO);
        dup2(output[1], STDOUT_FILENO);
        dup2(output[1], STDERR_FILENO);
        execl(PYSANDBOX_TOML_DEFECT_PROBE, PYSANDBOX_TOML_DEFECT_PROBE, nullptr);
        _exit(127);
    }
    close(input);
    close(output[1]);
    std::string said;
    char buffer[512];
    ssize_t n;
    while ((n = read(output[0], buffer, sizeof buffer)) > 0) said.append(buffer, n);
    close(output[0]);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    while (!said.empty() && said.back() == '\n') said.pop_back();
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        if (sig == SIGILL || sig == SIGTRAP) return "unreachable";
        return "signal " + std::to_string(sig) + (said.empty() ? "" : ": " + said);
    }
    const int code = WEXITSTATUS(status);
    return "exit " + std::to_string(code) + (said.empty() ? "" : ": " + said);
}

const std::string kDefectFixed =
    "toml++ no longer reaches __builtin_unreachable() on this input: the installed toml++ is "
    "fixed, so the guard can be removed (see src/plan/toml_prescan.hpp)";

// One code point from each range toml++ 3.3 trips on, and one it reads safely.
const std::string kE = "\xc3\xa9";  // é, U+00E9
const std::string kTripping[] = {
    kE,
    "\xe2\xb1\xa0",  // U+2C60
    "\xe3\x80\x81",  // 、 U+3001
    "\xef\xac\xb0",  // U+FB30
};
const std::string kSafe = "\xe4\xb8\x80";  // 一, U+4E00

const std::string kOutside = "a non-ASCII character outside a string or a comment";
const std::string kAfterBackslash =
    "a non-ASCII character right after a backslash in a string (write it as \\uXXXX)";
const std::string kAfterLineEnding =
    "a non-ASCII character first after a line-ending backslash (write it as \\uXXXX)";

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
            "a = \"\"\"x\\\\\n" + kE + "\"\"\"\n",     // an escaped backslash ends no line
            "a = \"\\\"" + kE + "\"\n",                // an escaped quote does not close
            "a = 1979-05-27 07:32:00 # " + kE + "\n",  // a date with a space, then a comment
            "a = true#" + kE + "\n",
            "a = {}\nb = \"" + kE + "\"\n",
            "a = []\nb = \"" + kE + "\"\n",
            "a = '''x\\\n" + kE + "'''\n",  // literal strings have no escapes
        };
        for (const auto& text : valid) {
            CAPTURE(text);
            CHECK(prescan(text) == "(accepted)");
            CHECK(parses(text));
        }
    }

    // ---- [code]

    TEST_CASE("guard [code]: non-ASCII outside strings and comments is refused where it is") {
        for (const auto& c : kTripping) {
            CAPTURE(c);
            CHECK(prescan(c) == "1:1: " + kOutside);  // the minimal input
            CHECK(prescan("x = 1 " + c + "\n") == "1:7: " + kOutside);
            CHECK(prescan("x" + c + " = 1\n") == "1:2: " + kOutside);
        }
        CHECK(prescan("\xef\xbb\xbf"
                      "a = 1\n") == "1:1: " + kOutside);  // a BOM too
        CHECK(prescan("[" + kE + "]\n") == "1:2: " + kOutside);
        CHECK(prescan("a = \"\"\"x\"\"\"\"\n" + kE + " = 1\n") == "2:1: " + kOutside);
        CHECK(prescan("a = \"x\"\n" + kE + "\n") == "2:1: " + kOutside);
        // What reading a profile says.
        CHECK(load_error(kE) == "inline.toml:1:1: " + kOutside);
        CHECK(load_error("description = \"x\"\n" + kE + "\n") == "inline.toml:2:1: " + kOutside);
    }

    TEST_CASE("guard [code]: inside a bare value a quote opens no string") {
        // toml++ scans a bare value up to a value terminator, across quotes and '='.
        CHECK(prescan("x =1\"" + kE + "\"\n") == "1:6: " + kOutside);
        // fuzz/regressions/profile/bare-value-scans-past-quote-and-equals.toml
        CHECK(prescan(std::string("[rk]\ne  =8\"@\0\0@=\"\x01\0\0\0\0\xef\xbb\xb7\"\n@", 28)) ==
              "2:18: " + kOutside);
        // After a date and a space toml++ reads on for the time if a digit follows.
        CHECK(prescan("a = 1979-05-27 0\"" + kE + "\"\n") == "1:18: " + kOutside);
        // Without the digit it stops at the quote; the guard refuses all the same.
        CHECK(prescan("a = 1979-05-27 \"" + kE + "\"\n") == "1:17: " + kOutside);
        // Whatever follows a finished value, other than a separator, is read as code.
        CHECK(prescan("a = \"x\" \"" + kE + "\"\n") == "1:10: " + kOutside);
        CHECK(prescan("a = [1 \"" + kE + "\"]\n") == "1:9: " + kOutside);
        CHECK(load_error("description =1\"" + kE + "\"\n") == "inline.toml:1:16: " + kOutside);
    }

    TEST_CASE("toml++ 3.3 defect [code]: toml++ alone reaches __builtin_unreachable()") {
        for (const auto& c : kTripping) {
            CAPTURE(c);
            CHECK_MESSAGE(unguarded(c) == "unreachable", kDefectFixed);
            CHECK_MESSAGE(unguarded("x = 1 " + c + "\n") == "unreachable", kDefectFixed);
            CHECK_MESSAGE(unguarded("x =1\"" + c + "\"\n") == "unreachable", kDefectFixed);
            CHECK_MESSAGE(unguarded("x" + c + " = 1\n") == "unreachable", kDefectFixed);
            CHECK_MESSAGE(unguarded("x = 1979-05-27 0\"" + c + "\"\n") == "unreachable",
                          kDefectFixed);
        }
        // The ends of the ranges the header names trip; the code points just outside do not.
        const char* const range_ends[] = {
            "\xc2\xa1",     "\xd2\x99",      // U+00A1, U+0499
            "\xe2\xb1\x9e", "\xe2\xbf\xbf",  // U+2C5E, U+2FFF
            "\xe3\x80\x81", "\xe3\x81\x97",  // U+3001, U+3057
            "\xef\xac\xa6", "\xef\xbb\xbe",  // U+FB26, U+FEFE
        };
        for (const char* c : range_ends) {
            CAPTURE(c);
            CHECK_MESSAGE(unguarded(std::string("x = 1 ") + c) == "unreachable", kDefectFixed);
        }
        const char* const just_outside[] = {
            "\xc2\xa0",     "\xd2\x9a",      // U+00A0 (a space to toml++), U+049A
            "\xe2\xb1\x9d", "\xe3\x80\x80",  // U+2C5D, U+3000 (a space to toml++)
            "\xe3\x81\x98", "\xef\xac\xa5",  // U+3058, U+FB25
            "\xef\xbb\xbf",                  // U+FEFF (a space to toml++)
        };
        for (const char* c : just_outside) {
            CAPTURE(c);
            CHECK(unguarded(std::string("x = 1 ") + c).starts_with("exit 1: 1:7: "));
        }
        // The probe: where a code point toml++ reads safely stands, toml++'s ordinary error.
        CHECK(unguarded(kSafe).starts_with("exit 1: 1:1: "));
        CHECK(unguarded("x = 1 " + kSafe + "\n").starts_with("exit 1: 1:7: "));
        CHECK(unguarded("x =1\"" + kSafe + "\"\n").starts_with("exit 1: 1:5: "));
    }

    // ---- [escape]

    TEST_CASE("guard [escape]: non-ASCII right after a backslash in a multi-line string") {
        CHECK(prescan("a = \"\"\"\\" + kE + "\"\"\"\n") == "1:9: " + kAfterBackslash);
        CHECK(prescan("a = \"\"\"x\ny\\" + kSafe + "\"\"\"\n") == "2:3: " + kAfterBackslash);
        CHECK(prescan("\"\"\"\\" + kE + "\"\"\" = 1\n") == "1:5: " + kAfterBackslash);  // a key
        CHECK(load_error("description = \"\"\"\\" + kE + "\"\"\"\n") ==
              "inline.toml:1:19: " + kAfterBackslash);
        // A one-line string is left to toml++, which asks nothing there and reports the escape.
        CHECK(prescan("a = \"\\" + kE + "\"\n") == "(accepted)");
        CHECK(load_error("description = \"\\" + kE + "\"\n") ==
              "inline.toml:1:17: Error while parsing string: unknown escape sequence '\\" + kE +
                  "'");
    }

    TEST_CASE("toml++ 3.3 defect [escape]: toml++ alone reaches __builtin_unreachable()") {
        for (const auto& c : kTripping) {
            CAPTURE(c);
            CHECK_MESSAGE(unguarded("a = \"\"\"\\" + c + "\"\"\"\n") == "unreachable",
                          kDefectFixed);
        }
        // The probe: a code point toml++ reads safely there is an unknown escape.
        CHECK(unguarded("a = \"\"\"\\" + kSafe + "\"\"\"\n") ==
              "exit 1: 1:9: Error while parsing string: unknown escape sequence '\\" + kSafe + "'");
        // Not a defect: in a one-line string toml++ does not ask (why the guard lets it by).
        CHECK(unguarded("a = \"\\" + kE + "\"\n") ==
              "exit 1: 1:7: Error while parsing string: unknown escape sequence '\\" + kE + "'");
    }

    // ---- [line-ending]

    TEST_CASE("guard [line-ending]: the first character after a line-ending backslash") {
        CHECK(prescan("a = \"\"\"x\\\n" + kE + "\"\"\"\n") == "2:1: " + kAfterLineEnding);
        // It swallows blanks and line breaks, on its line too.
        CHECK(prescan("a = \"\"\"x\\\n\n   " + kE + "\"\"\"\n") == "3:4: " + kAfterLineEnding);
        CHECK(prescan("a = \"\"\"x\\  \r\n" + kE + "\"\"\"\n") == "2:1: " + kAfterLineEnding);
        CHECK(prescan("a = \"\"\"x\\ " + kE + "\"\"\"\n") == "1:11: " + kAfterLineEnding);
        CHECK(load_error("description = \"\"\"x\\\n  " + kE + "\"\"\"\n") ==
              "inline.toml:2:3: " + kAfterLineEnding);
        // Valid TOML that toml++ reads safely is refused as well (the guard does not copy
        // toml++'s code point table).
        CHECK(prescan("a = \"\"\"x\\\n" + kSafe + "\"\"\"\n") == "2:1: " + kAfterLineEnding);
    }

    TEST_CASE("toml++ 3.3 defect [line-ending]: toml++ alone reaches __builtin_unreachable()") {
        for (const auto& c : kTripping) {
            CAPTURE(c);
            CHECK_MESSAGE(unguarded("a = \"\"\"x\\\n" + c + "\"\"\"\n") == "unreachable",
                          kDefectFixed);
            CHECK_MESSAGE(unguarded("a = \"\"\"x\\\n\n   " + c + "\"\"\"\n") == "unreachable",
                          kDefectFixed);
            // Blanks after the backslash on its line: consume_leading_whitespace() asks.
            CHECK_MESSAGE(unguarded("a = \"\"\"x\\ " + c + "\"\"\"\n") == "unreachable",
                          kDefectFixed);
        }
        // The probe: a code point toml++ reads safely there parses.
        CHECK(unguarded("a = \"\"\"x\\\n" + kSafe + "\"\"\"\n") == "exit 0");
        CHECK(unguarded("a = \"\"\"x\\ " + kSafe + "\"\"\"\n") ==
              "exit 1: 1:11: Error while parsing string: line-ending backslashes must be the "
              "last non-whitespace character on the line");
    }
}
