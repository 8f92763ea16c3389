// The requests the fronts read (fronts/requests.hpp): a session's cells (code, timeout, files)
// and the base64 they carry; batch jobs, one JSON line each (code or a host script, args, stdin,
// timeout, profile, inputs).

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include <doctest/doctest.h>

#include "fronts/requests.hpp"
#include "plan/units.hpp"
#include "report/encoding.hpp"

using namespace pysandbox;
using json = nlohmann::json;

TEST_SUITE("cell requests") {
    // Internal: a suite's namespace is named by a per-file counter, which another file's suite
    // may share (the batch jobs' suite below has a problem() too).
    namespace {
    Limits limits;

    const Cell& cell_of(const std::variant<CellRequest, BadRequest>& parsed) {
        REQUIRE(std::holds_alternative<CellRequest>(parsed));
        return std::get<CellRequest>(parsed).cell;
    }

    std::string problem(std::string_view line) {
        const auto parsed = parse_cell_request(line, limits);
        REQUIRE(std::holds_alternative<BadRequest>(parsed));
        return std::get<BadRequest>(parsed).message;
    }
    }  // namespace

    TEST_CASE("a request with every field") {
        const auto parsed = parse_cell_request(
            R"({"id": {"any": [1]}, "code": "x = 1", "timeout": "2s",)"
            R"( "files": [{"name": "a.csv", "text": "1,2"}, {"name": "b", "base64": "AAE="}]})",
            limits);
        const Cell& cell = cell_of(parsed);
        CHECK(cell.id == json{{"any", {1}}});
        CHECK(cell.code == "x = 1");
        CHECK(cell.timeout == std::chrono::seconds(2));
        REQUIRE(cell.files.size() == 2);
        CHECK(cell.files[0].data == "1,2");
        CHECK(cell.files[1].data == std::string("\0\1", 2));
        CHECK(cell.warnings.empty());
    }

    TEST_CASE("a timeout in seconds, and one over the profile's limit") {
        CHECK(cell_of(parse_cell_request(R"({"code": "", "timeout": 0.25})", limits)).timeout ==
              std::chrono::milliseconds(250));
        const auto parsed = parse_cell_request(R"({"code": "", "timeout": "1h"})", limits);
        const Cell& cell = cell_of(parsed);
        CHECK(cell.timeout == limits.wall_time);
        REQUIRE(cell.warnings.size() == 1);
        CHECK(cell.warnings[0].find("over the profile's limit") != std::string::npos);
    }

    TEST_CASE("bad requests name the problem, and keep the id when there is one") {
        CHECK(problem("not json") == "the request is not valid JSON");
        // Bounded before a tree is built; the id cannot be read, so none is echoed.
        const std::string deep_id =
            R"({"code": "", "id": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
        CHECK(problem(deep_id) == "the request is nested deeper than 64 levels");
        CHECK(std::get<BadRequest>(parse_cell_request(deep_id, limits)).id.is_null());
        std::string many = R"({"code": "", "id": [)";
        for (int i = 0; i < 70000; ++i) many += "0,";
        many += "0]}";
        CHECK(problem(many) == "the request holds more than 65536 values");
        CHECK(problem("[1]") == "the request must be a JSON object, not array");
        CHECK(problem(R"({"id": 3})") == "\"code\" is missing");
        CHECK(problem(R"({"code": 3})") == "\"code\" must be a string, not number");
        CHECK(problem(R"({"code": "", "timout": "1s"})") ==
              "unknown field \"timout\" (fields: id, code, timeout, files, stream)");
        CHECK(problem(R"({"code": "", "timeout": -1})") ==
              "\"timeout\" must be more than 0 seconds");
        CHECK(problem(R"({"code": "", "timeout": "soon"})").starts_with("\"timeout\": "));
        CHECK(problem(R"({"code": "", "files": [{"name": "../x", "text": ""}]})") ==
              "files[0].name \"../x\" must be a plain file name (no '/', not . or ..)");
        CHECK(problem(R"({"code": "", "files": [{"name": "a", "text": "", "base64": ""}]})") ==
              "files[0] needs exactly one of \"text\" and \"base64\"");
        CHECK(problem(R"({"code": "", "files": [{"name": "a", "base64": "!!"}]})") ==
              "files[0].base64 is not valid base64");
        CHECK(problem(R"({"code": "", "files": [{"name": "a", "text": ""},)"
                      R"( {"name": "a", "text": ""}]})") == "files[1].name \"a\" is given twice");
        const auto parsed = parse_cell_request(R"({"id": "seven", "code": 1})", limits);
        CHECK(std::get<BadRequest>(parsed).id == "seven");
        CHECK(
            problem(std::string(kMaxRequestLine + 1, ' ')).starts_with("the request line is over"));
    }

    TEST_CASE("stream: absent is false; only true or false is taken") {
        const auto plain = parse_cell_request(R"({"code": ""})", limits);
        REQUIRE(std::holds_alternative<CellRequest>(plain));
        CHECK_FALSE(std::get<CellRequest>(plain).stream);
        const auto streamed =
            parse_cell_request(R"({"id": 1, "code": "", "stream": true})", limits);
        REQUIRE(std::holds_alternative<CellRequest>(streamed));
        CHECK(std::get<CellRequest>(streamed).stream);
        const auto off = parse_cell_request(R"({"code": "", "stream": false})", limits);
        REQUIRE(std::holds_alternative<CellRequest>(off));
        CHECK_FALSE(std::get<CellRequest>(off).stream);
        CHECK(problem(R"({"code": "", "stream": 1})") ==
              "\"stream\" must be true or false, not number");
        CHECK(problem(R"({"code": "", "stream": "true"})") ==
              "\"stream\" must be true or false, not string");
        CHECK(problem(R"({"code": "", "stream": null})") ==
              "\"stream\" must be true or false, not null");
        const auto bad = parse_cell_request(R"({"id": "s", "code": "", "stream": []})", limits);
        CHECK(std::get<BadRequest>(bad).id == "s");
    }

    TEST_CASE("files are held to limits.tmp_size together") {
        Limits small;
        small.tmp_size = 4;
        const auto parsed = parse_cell_request(
            R"({"code": "", "files": [{"name": "a", "text": "abc"}, {"name": "b", "text": "de"}]})",
            small);
        REQUIRE(std::holds_alternative<BadRequest>(parsed));
        CHECK(std::get<BadRequest>(parsed).message ==
              "the files are over " + units::format_size(4) + " together (limits.tmp_size)");
    }

    TEST_CASE("base64 decoding takes only well-formed, padded text") {
        CHECK(encoding::decode_base64("") == std::string());
        CHECK(encoding::decode_base64("aGk=") == std::string("hi"));
        CHECK(encoding::decode_base64("aGlp") == std::string("hii"));
        CHECK(encoding::decode_base64(encoding::base64(std::string("\0\xff\x10", 3))) ==
              std::string("\0\xff\x10", 3));
        CHECK_FALSE(encoding::decode_base64("aGk"));
        CHECK_FALSE(encoding::decode_base64("aG k"));
        CHECK_FALSE(encoding::decode_base64("a=Gk"));
    }
}

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
        CHECK(job.requirements.empty());
    }

    TEST_CASE("requirements: the packages a job asks for besides its profile's") {
        const auto parsed = parse_job(
            R"({"code": "x", "requirements": ["usespkg", "tinypkg==1.0"]})", kProfiles, kLimits);
        REQUIRE(std::holds_alternative<Job>(parsed));
        CHECK(std::get<Job>(parsed).requirements ==
              std::vector<std::string>{"usespkg", "tinypkg==1.0"});
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
        CHECK(problem(R"({"code": "", "args": )" + std::string(100000, '[') +
                      std::string(100000, ']') + "}") == "the job is nested deeper than 64 levels");
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
              "inputs, requirements)");
        CHECK(problem(R"({"code": "", "requirements": "tinypkg"})") ==
              "\"requirements\" must be an array of strings, not string");
        CHECK(problem(R"({"code": "", "requirements": null})") ==
              "\"requirements\" must be an array of strings, not null");
        CHECK(problem(R"({"code": "", "requirements": ["ok", "--index-url=http://x"]})") ==
              "requirements[1]: \"--index-url=http://x\" is not a requirement (pip options go on "
              "the command line: --index-url, --find-links, --allow-build)");
        CHECK(problem(R"({"script": "/nonexistent/x.py"})") ==
              "script \"/nonexistent/x.py\": No such file or directory");
        const auto parsed = parse_job(R"({"id": "j", "code": 1})", kProfiles, kLimits);
        CHECK(std::get<BadRequest>(parsed).id == "j");
    }
}
