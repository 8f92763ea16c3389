// `pysandbox doctor --json`: the object a readiness probe or a script reads.

#include <doctest/doctest.h>

#include <vector>

#include "fronts/doctor.hpp"

using pysandbox::doctor::Check;
using pysandbox::doctor::report_json;

TEST_CASE("doctor --json: schema, overall ok, and every check with its result and fix") {
    const std::vector<Check> checks{
        {"user namespaces", true, true, "unshare(CLONE_NEWUSER) works", ""},
        {"Landlock", false, false, "not available", "optional: a kernel >= 5.13"},
    };
    const auto out = report_json(checks);
    CHECK(out["schema"] == "pysandbox.doctor/v1");
    CHECK(out["version"].is_string());
    CHECK(out["ok"] == true);  // a failed optional check only warns
    REQUIRE(out["checks"].size() == 2);
    const auto& passed = out["checks"][0];
    CHECK(passed["name"] == "user namespaces");
    CHECK(passed["ok"] == true);
    CHECK(passed["required"] == true);
    CHECK(passed["detail"] == "unshare(CLONE_NEWUSER) works");
    CHECK(passed["fix"].is_null());
    const auto& warned = out["checks"][1];
    CHECK(warned["ok"] == false);
    CHECK(warned["required"] == false);
    CHECK(warned["fix"] == "optional: a kernel >= 5.13");
}

TEST_CASE("doctor --json: one failed required check makes the whole not ok") {
    const std::vector<Check> checks{
        {"user namespaces", false, true, "unshare(CLONE_NEWUSER): Operation not permitted",
         "sudo sysctl user.max_user_namespaces=15000"},
        {"Landlock", true, false, "ABI 7", ""},
    };
    CHECK(report_json(checks)["ok"] == false);
    CHECK(report_json({})["ok"] == true);
}
