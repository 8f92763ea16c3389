// The package store's pure parts: PEP 723 inline metadata, IDs, and where the store is.

#include <doctest/doctest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "plan/env_store.hpp"
#include "sys/errors.hpp"

namespace env_store = pysandbox::env_store;

TEST_CASE("inline metadata: the dependencies of the script block") {
    const std::string script =
        "#!/usr/bin/env python3\n"
        "# /// script\n"
        "# requires-python = \">=3.11\"\n"
        "# dependencies = [\n"
        "#   \"requests<3\",\n"
        "#\n"
        "#   \"rich\",\n"
        "# ]\n"
        "# ///\n"
        "import requests\n";
    const auto deps = env_store::inline_dependencies(script, "s.py");
    REQUIRE(deps.has_value());
    CHECK(*deps == std::vector<std::string>{"requests<3", "rich"});
}

TEST_CASE("inline metadata: requires-python, and the line that gives it") {
    const auto metadata = env_store::inline_metadata(
        "# /// script\n# dependencies = []\n# requires-python = \">=3.8\"\n# ///\n", "s.py");
    REQUIRE(metadata.has_value());
    CHECK(metadata->requires_python == ">=3.8");
    CHECK(metadata->requires_python_at == "s.py:3: the `# /// script` block");
    CHECK(metadata->dependencies.empty());
    const auto none = env_store::inline_metadata("# /// script\n# ///\n", "s.py");
    REQUIRE(none.has_value());
    CHECK(none->requires_python.empty());
}

TEST_CASE("inline metadata: none, empty, and malformed blocks") {
    CHECK_FALSE(env_store::inline_dependencies("print(1)\n# ///\n", "s.py").has_value());
    const auto empty = env_store::inline_dependencies("# /// script\n# ///\n", "s.py");
    REQUIRE(empty.has_value());
    CHECK(empty->empty());
    CHECK_THROWS_AS(env_store::inline_dependencies("# /// script\n# x = [\n", "s.py"),
                    pysandbox::UsageError);
    CHECK_THROWS_AS(env_store::inline_dependencies("# /// script\nx = 1\n# ///\n", "s.py"),
                    pysandbox::UsageError);
    CHECK_THROWS_AS(
        env_store::inline_dependencies("# /// script\n# dependencies = [1]\n# ///\n", "s.py"),
        pysandbox::UsageError);
    CHECK_THROWS_AS(
        env_store::inline_dependencies("# /// script\n# dependencies = [\n# ///\n", "s.py"),
        pysandbox::UsageError);
}

// What the error says, for the checks on where it points.
std::string error_of(const std::string& text) {
    try {
        env_store::inline_dependencies(text, "s.py");
    } catch (const pysandbox::UsageError& e) {
        return e.what();
    }
    return "(no error)";
}

TEST_CASE("inline metadata: blocks as PEP 723's regex finds them") {
    // Other types are not the script's; a `# /// script` line inside one is its content.
    CHECK_FALSE(
        env_store::inline_dependencies("# /// pyproject\n# dependencies = [\"x\"]\n# ///\n", "s.py")
            .has_value());
    CHECK_FALSE(env_store::inline_dependencies(
                    "# /// other\n# /// script\n# dependencies = [\"x\"]\n# ///\n", "s.py")
                    .has_value());
    // The block closes at the last `# ///` of its comment lines (the regex is greedy).
    const auto greedy = env_store::inline_dependencies(
        "# /// script\n# dependencies = [\"a\"]\n# note = \"\"\"\n# ///\n# \"\"\"\n# "
        "///\nprint(1)\n",
        "s.py");
    REQUIRE(greedy.has_value());
    CHECK(*greedy == std::vector<std::string>{"a"});
    // Windows line ends read as Python's text mode reads them; "#" alone is an empty line.
    const auto crlf = env_store::inline_dependencies(
        "# /// script\r\n#\r\n# dependencies = [\"b\"]\r\n# ///\r\n", "s.py");
    REQUIRE(crlf.has_value());
    CHECK(*crlf == std::vector<std::string>{"b"});
    // Not an opening line: trailing space, another character than a space after `#`.
    CHECK_FALSE(env_store::inline_dependencies("# /// script \n# ///\n", "s.py").has_value());
    CHECK_FALSE(env_store::inline_dependencies("#/// script\n# ///\n", "s.py").has_value());
    // A block without dependencies asks for none.
    const auto none = env_store::inline_dependencies(
        "# /// script\n# requires-python = \">=3.8\"\n# ///\n", "s.py");
    REQUIRE(none.has_value());
    CHECK(none->empty());
}

TEST_CASE("inline metadata: openers that never close cost one pass, not one each") {
    // The script's to write, read on the host before any sandbox: 200,000 lines of `# /// a`
    // took the former reader, which rescanned the rest of the comment run at each, minutes.
    std::string script;
    for (int i = 0; i < 200'000; ++i) script += "# /// a\n";
    script += "print(1)\n# /// script\n# dependencies = [\"x\"]\n# ///\n";
    const auto start = std::chrono::steady_clock::now();
    const auto deps = env_store::inline_dependencies(script, "s.py");
    const auto took = std::chrono::steady_clock::now() - start;
    REQUIRE(deps.has_value());
    CHECK(*deps == std::vector<std::string>{"x"});
    CHECK(took < std::chrono::seconds(5));
}

TEST_CASE("inline metadata: errors name the line and what is wrong") {
    CHECK(error_of("# /// script\n# dependencies = []\n# ///\nprint(1)\n# /// script\n# ///\n")
              .find("s.py:5: a second `# /// script` block") != std::string::npos);
    // Without a line between, the first block's comment lines run on: it closes at the last
    // `# ///`, and what it holds is no TOML.
    CHECK(error_of("# /// script\n# ///\n# /// script\n# ///\n").find("s.py:") == 0);
    CHECK(error_of("print(1)\n# /// script\n# dependencies = [\"x\"]\nprint(2)\n")
              .find("s.py:2: the `# /// script` block (PEP 723) has no closing") !=
          std::string::npos);
    CHECK(error_of("# /// script\n# a = 1\n# dependencies = [\n# ///\n").starts_with("s.py:"));
    CHECK(error_of("# /// script\n# a = 1\n# dependencies = \"x\"\n# ///\n")
              .find("s.py:3: the `# /// script` block: dependencies must be an array") !=
          std::string::npos);
    CHECK(error_of("# /// script\n# requires-python = 3\n# ///\n").find("requires-python") !=
          std::string::npos);
    CHECK(error_of("# /// script\n# dependencies = [\"\"]\n# ///\n").find("one-line string") !=
          std::string::npos);
}

TEST_CASE("IDs and the store's place") {
    CHECK(env_store::is_full_id(std::string(64, 'a')));
    CHECK_FALSE(env_store::is_full_id(std::string(63, 'a')));
    CHECK_FALSE(env_store::is_full_id(std::string(64, 'g')));
    CHECK(env_store::store_dir(std::string("/srv/envs/"), {}) == "/srv/envs");
    CHECK_THROWS_AS(env_store::store_dir(std::string("relative"), {}), pysandbox::UsageError);
    CHECK(env_store::store_dir(std::nullopt, {"PYSANDBOX_CACHE_DIR=/var/x"}) == "/var/x");
    CHECK_THROWS_AS(env_store::resolve_id("/nonexistent-store", "abc"), pysandbox::UsageError);
    CHECK_THROWS_AS(env_store::resolve_id("/nonexistent-store", "0123456789"),
                    pysandbox::UsageError);
}
