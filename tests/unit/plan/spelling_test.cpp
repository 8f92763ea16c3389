// "Did you mean": what a typo most likely meant, and when nothing is close enough to say.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "plan/spelling.hpp"

namespace spelling = pysandbox::spelling;

TEST_SUITE("plan.spelling") {
    TEST_CASE("edit_distance counts insertions, deletions, substitutions and swaps") {
        CHECK(spelling::edit_distance("timeout", "timeout") == 0);
        CHECK(spelling::edit_distance("timout", "timeout") == 1);
        CHECK(spelling::edit_distance("rnu", "run") == 1);
        CHECK(spelling::edit_distance("", "abc") == 3);
        CHECK(spelling::edit_distance("kitten", "sitting") == 3);
    }

    TEST_CASE("nearest names a close name, or the only one the typo begins") {
        const std::vector<std::string> options{"--timeout", "--cpu-time", "--memory", "--json"};
        CHECK(spelling::nearest("--timout", options) == "--timeout");
        CHECK(spelling::nearest("--jsno", options) == "--json");
        const std::vector<std::string> profiles{"default", "datascience", "network", "strict"};
        CHECK(spelling::nearest("datasci", profiles) == "datascience");
        CHECK(spelling::nearest("defualt", profiles) == "default");
        CHECK(spelling::did_you_mean("stirct", profiles) == "; did you mean strict?");
    }

    TEST_CASE("nearest says nothing when nothing is close, or two names are") {
        const std::vector<std::string> profiles{"default", "datascience", "network", "strict"};
        CHECK_FALSE(spelling::nearest("gpu", profiles));
        CHECK_FALSE(spelling::nearest("d", profiles));
        CHECK(spelling::did_you_mean("xyzzy", profiles).empty());
        CHECK_FALSE(spelling::nearest("ab", std::vector<std::string>{"aa", "bb"}));
    }
}
