// Reading Python's uncaught exception out of stderr: the texts are what python3.11 prints.

#include <doctest/doctest.h>

#include <string>

#include "report/traceback.hpp"

using pysandbox::parse_python_exception;

namespace {

const std::string kZeroDivision =
    "hi\n"
    "Traceback (most recent call last):\n"
    "  File \"/sandbox/a.py\", line 4, in <module>\n"
    "    f(0)\n"
    "  File \"/sandbox/a.py\", line 2, in f\n"
    "    return 1/x\n"
    "           ~^~\n"
    "ZeroDivisionError: division by zero\n";

}  // namespace

TEST_CASE("an exception raised in the script: type, message, line, traceback") {
    auto e = parse_python_exception(kZeroDivision, "/sandbox/a.py");
    REQUIRE(e);
    CHECK(e->type == "ZeroDivisionError");
    CHECK(e->message == "division by zero");
    CHECK(e->line == 2);
    CHECK(e->traceback == kZeroDivision.substr(3));
    CHECK(e->summary == "ZeroDivisionError: division by zero (line 2)");
    CHECK(e->hint.empty());
}

TEST_CASE("the line is the deepest frame in the script, not in a library") {
    auto e = parse_python_exception(
        "Traceback (most recent call last):\n"
        "  File \"/sandbox/c.py\", line 2, in <module>\n"
        "    json.loads(\"{\")\n"
        "  File \"/usr/lib/python3.11/json/__init__.py\", line 346, in loads\n"
        "    return _default_decoder.decode(s)\n"
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes: line 1 "
        "column 2 (char 1)\n",
        "/sandbox/c.py");
    REQUIRE(e);
    CHECK(e->type == "json.decoder.JSONDecodeError");
    CHECK(e->message ==
          "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)");
    CHECK(e->line == 2);
}

TEST_CASE("a SyntaxError in the script has no Traceback header") {
    auto e = parse_python_exception(
        "  File \"/sandbox/b.py\", line 1\n"
        "    x = (\n"
        "        ^\n"
        "SyntaxError: '(' was never closed\n",
        "/sandbox/b.py");
    REQUIRE(e);
    CHECK(e->type == "SyntaxError");
    CHECK(e->message == "'(' was never closed");
    CHECK(e->line == 1);
    CHECK(e->traceback.starts_with("  File \"/sandbox/b.py\", line 1\n"));

    auto tab = parse_python_exception(
        "  File \"/sandbox/g.py\", line 3\n    return 2\n"
        "TabError: inconsistent use of tabs and spaces in indentation\n",
        "/sandbox/g.py");
    REQUIRE(tab);
    CHECK(tab->type == "TabError");
    CHECK(tab->line == 3);
}

TEST_CASE("a line number Python would never print is no line (the script writes stderr)") {
    for (const char* number : {"0", "-5"}) {
        auto e = parse_python_exception(std::string("Traceback (most recent call last):\n"
                                                    "  File \"/sandbox/f.py\", line ") +
                                            number + ", in <module>\nValueError: forged\n",
                                        "/sandbox/f.py");
        REQUIRE(e);
        CHECK(e->type == "ValueError");
        CHECK_FALSE(e->line);
        CHECK(e->summary == "ValueError: forged");
    }
}

TEST_CASE("chained exceptions: the last one is the one that ended the script") {
    auto e = parse_python_exception(
        "Traceback (most recent call last):\n"
        "  File \"<string>\", line 2, in <module>\n"
        "ZeroDivisionError: division by zero\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        "  File \"<string>\", line 4, in <module>\n"
        "ValueError: multi\n"
        "line\n",
        "<string>");
    REQUIRE(e);
    CHECK(e->type == "ValueError");
    CHECK(e->message == "multi\nline");
    CHECK(e->line == 4);
    CHECK(e->summary == "ValueError: multi (line 4)");
}

TEST_CASE("a bare exception class and a dotted one") {
    auto e = parse_python_exception(
        "Traceback (most recent call last):\n  File \"/sandbox/e.py\", line 2, in <module>\n"
        "    raise E()\nE\n",
        "/sandbox/e.py");
    REQUIRE(e);
    CHECK(e->type == "E");
    CHECK(e->message.empty());
    CHECK(e->summary == "E (line 2)");
}

TEST_CASE("the sandbox's own frames are left out") {
    auto e = parse_python_exception(
        "Traceback (most recent call last):\n"
        "  File \"/sandbox/.pysandbox/boot.py\", line 9, in <module>\n"
        "    run()\n"
        "  File \"<frozen runpy>\", line 291, in run_path\n"
        "  File \"/sandbox/x.py\", line 1, in <module>\n"
        "    import nosuch\n"
        "ModuleNotFoundError: No module named 'nosuch'\n",
        "/sandbox/x.py");
    REQUIRE(e);
    CHECK(e->traceback ==
          "Traceback (most recent call last):\n"
          "  File \"/sandbox/x.py\", line 1, in <module>\n"
          "    import nosuch\n"
          "ModuleNotFoundError: No module named 'nosuch'\n");
    CHECK(e->hint.find("standard library") != std::string::npos);
}

TEST_CASE("hints for what the sandbox causes") {
    auto hint = [](std::string last_line) {
        auto e = parse_python_exception(
            "Traceback (most recent call last):\n  File \"/sandbox/x.py\", line 1, in <module>\n" +
                last_line + "\n",
            "/sandbox/x.py");
        REQUIRE(e);
        return e->hint;
    };
    CHECK(hint("MemoryError").find("--memory") != std::string::npos);
    CHECK(hint("OSError: [Errno 28] No space left on device").find("--tmp-size") !=
          std::string::npos);
    CHECK(hint("OSError: [Errno 30] Read-only file system: '/x'").find("/tmp") !=
          std::string::npos);
    CHECK(hint("OSError: [Errno 101] Network is unreachable").find("network") != std::string::npos);
    CHECK(hint("KeyError: 'k'").empty());
}

TEST_CASE("text that is not an exception gives nothing") {
    CHECK_FALSE(parse_python_exception("", "x"));
    CHECK_FALSE(parse_python_exception("bye\n", "x"));
    CHECK_FALSE(parse_python_exception("Error: not a traceback\n", "x"));
    CHECK_FALSE(parse_python_exception("Traceback (most recent call last):\n", "x"));
    CHECK_FALSE(parse_python_exception("  File \"x\", line 1\n", "x"));
    CHECK_FALSE(parse_python_exception("  File \"x\", line 1, in f\n  not an exception!\n", "x"));
    CHECK_FALSE(parse_python_exception(std::string("\0\n\xff", 3), "x"));
}

TEST_CASE("a traceback followed by later output is still found, up to what follows it") {
    auto e = parse_python_exception(
        "Traceback (most recent call last):\n  File \"x\", line 7, in <module>\n"
        "RuntimeError: boom\nprinted by an atexit handler\n",
        "x");
    REQUIRE(e);
    CHECK(e->type == "RuntimeError");
    CHECK(e->line == 7);
}
