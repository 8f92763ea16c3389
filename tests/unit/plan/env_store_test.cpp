// The package store's pure parts: PEP 723 inline metadata, IDs, and where the store is.

#include <doctest/doctest.h>

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
