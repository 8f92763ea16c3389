// A session's requests read (cells: code, timeout, files), and the base64 they carry.

#include <chrono>
#include <string>
#include <variant>

#include <doctest/doctest.h>

#include "fronts/cell_request.hpp"
#include "plan/units.hpp"
#include "report/encoding.hpp"

using namespace pysandbox;
using json = nlohmann::json;

TEST_SUITE("cell requests") {
    // Internal: a suite's namespace is named by a per-file counter, which another file's suite
    // may share (batch_test.cpp has a problem() too).
    namespace {
    Limits limits;

    const Cell& cell_of(const std::variant<Cell, BadRequest>& parsed) {
        REQUIRE(std::holds_alternative<Cell>(parsed));
        return std::get<Cell>(parsed);
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
        CHECK(problem("[1]") == "the request must be a JSON object, not array");
        CHECK(problem(R"({"id": 3})") == "\"code\" is missing");
        CHECK(problem(R"({"code": 3})") == "\"code\" must be a string, not number");
        CHECK(problem(R"({"code": "", "timout": "1s"})") ==
              "unknown field \"timout\" (fields: id, code, timeout, files)");
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
