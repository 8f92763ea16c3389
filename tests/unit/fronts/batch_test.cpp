// Batch jobs read: one JSON line each (code or a host script, args, stdin, timeout, profile,
// inputs).

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include <doctest/doctest.h>

#include "fronts/batch.hpp"

using namespace pysandbox;
using json = nlohmann::json;

TEST_SUITE("batch jobs") {
    const std::vector<std::string> kProfiles{"default", "datascience"};
    Limits small_limits() {
        Limits limits;
        limits.tmp_size = 8;
        return limits;
    }
    const Limits kDefaultLimits;
    const Limits kSmall = small_limits();
    const std::vector<const Limits*> kLimits{&kDefaultLimits, &kSmall};

    std::string problem(std::string_view line) {
        const auto parsed = parse_job(line, kProfiles, kLimits);
        REQUIRE(std::holds_alternative<BadRequest>(parsed));
        return std::get<BadRequest>(parsed).message;
    }

    TEST_CASE("code, args, stdin, timeout and profile") {
        const auto parsed =
            parse_job(R"({"id": 7, "code": "x", "args": ["a"], "stdin": "in", "timeout": "2s",)"
                      R"( "profile": "datascience"})",
                      kProfiles, kLimits);
        REQUIRE(std::holds_alternative<Job>(parsed));
        const Job& job = std::get<Job>(parsed);
        CHECK(job.cell.id == 7);
        CHECK(job.profile == 1);
        CHECK(job.cell.argv == std::vector<std::string>{"-c", "a"});
        CHECK(job.cell.stdin_data == "in");
        CHECK(job.cell.timeout == std::chrono::seconds(2));
        CHECK(job.cell.filename.empty());
    }

    TEST_CASE("a script and inputs are host files, read now") {
        char dir_template[] = "/tmp/pysandbox-batch-test-XXXXXX";
        REQUIRE(::mkdtemp(dir_template) != nullptr);
        const std::filesystem::path dir = dir_template;
        std::ofstream(dir / "solve.py") << "print(1)\n";
        std::ofstream(dir / "data.csv") << "a,b\n";
        const json line = {{"script", (dir / "solve.py").string()},
                           {"inputs", {(dir / "data.csv").string() + "=in.csv"}}};
        const auto parsed = parse_job(line.dump(), kProfiles, kLimits);
        REQUIRE(std::holds_alternative<Job>(parsed));
        const Job& job = std::get<Job>(parsed);
        CHECK(job.cell.code == "print(1)\n");
        CHECK(job.cell.filename == "solve.py");
        CHECK(job.cell.argv == std::vector<std::string>{"solve.py"});
        REQUIRE(job.cell.files.size() == 1);
        CHECK(job.cell.files[0].name == "in.csv");
        CHECK(job.cell.files[0].data == "a,b\n");
        // Held to the profile's /tmp size: datascience here has 8 bytes.
        const json big = {
            {"code", ""}, {"profile", "datascience"}, {"inputs", {(dir / "solve.py").string()}}};
        CHECK(problem(big.dump()).find("is over") != std::string::npos);
        std::filesystem::remove_all(dir);
    }

    TEST_CASE("bad lines say what is wrong, with the id when there is one") {
        CHECK(problem("nope") == "the job is not valid JSON");
        CHECK(problem("[]") == "a job must be a JSON object, not array");
        CHECK(problem(R"({"id": 1})") == "a job needs exactly one of \"code\" and \"script\"");
        CHECK(problem(R"({"code": "", "script": "x"})") ==
              "a job needs exactly one of \"code\" and \"script\"");
        CHECK(problem(R"({"code": "", "args": "a"})") ==
              "\"args\" must be an array of strings, not string");
        CHECK(problem(R"({"code": "", "profile": "network"})") ==
              "profile \"network\" is not one this batch allows (-p: default, datascience)");
        CHECK(problem(R"({"code": "", "env": {}})") ==
              "unknown field \"env\" (fields: id, code, script, args, stdin, timeout, profile, "
              "inputs)");
        CHECK(problem(R"({"script": "/nonexistent/x.py"})") ==
              "script \"/nonexistent/x.py\": No such file or directory");
        const auto parsed = parse_job(R"({"id": "j", "code": 1})", kProfiles, kLimits);
        CHECK(std::get<BadRequest>(parsed).id == "j");
    }
}
