// The MCP server's tools without a server (arguments read, results rendered for a model).

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "fronts/mcp_tools.hpp"

using namespace pysandbox;
using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

namespace {

const std::vector<std::string> kOffered{"default", "datascience"};

std::string refusal(const json& arguments) {
    try {
        mcp::parse_run_arguments(arguments, kOffered);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

ordered_json segment(const char* stream, std::size_t length) {
    return ordered_json::array({stream, length});
}

// A cell's result as the session makes it, cut to what run_result reads.
ordered_json cell_result(const std::string& status, const std::string& out, const std::string& err,
                         ordered_json order) {
    return {
        {"schema", "pysandbox.result/v1"},
        {"status", status},
        {"message", status == "ok" ? ordered_json(nullptr) : ordered_json("stopped: " + status)},
        {"stdout", out},
        {"stderr", err},
        {"encoding", {{"stdout", "utf-8"}, {"stderr", "utf-8"}}},
        {"output", std::move(order)},
        {"truncated", {{"stdout", false}, {"stderr", false}}},
        {"bytes", {{"stdout", out.size()}, {"stderr", err.size()}}},
        {"exception", nullptr},
        {"files", ordered_json::array()},
        {"warnings", ordered_json::array()},
        {"figures", ordered_json::array()}};
}

// run_python's result as the newest protocol shapes it.
ordered_json run_latest(ordered_json cell) {
    return mcp::run_result(std::move(cell), mcp::kLatestProtocol);
}

const mcp::Protocol& protocol(std::string_view version) {
    const mcp::Protocol& found = mcp::negotiate(version);
    REQUIRE(found.version == version);
    return found;
}

// A directory of host copies, as the collector leaves them, removed at the end.
struct CopiesDir {
    CopiesDir() {
        char dir_template[] = "/tmp/pysandbox-mcp-test-XXXXXX";
        REQUIRE(::mkdtemp(dir_template) != nullptr);
        path = dir_template;
    }
    ~CopiesDir() { std::filesystem::remove_all(path); }
    CopiesDir(const CopiesDir&) = delete;
    CopiesDir& operator=(const CopiesDir&) = delete;
    std::string write(const std::string& name, const std::string& data) const {
        std::ofstream(path / name, std::ios::binary) << data;
        return (path / name).string();
    }
    std::filesystem::path path;
};

ordered_json made_file(const std::string& name, std::size_t size, ordered_json host) {
    return ordered_json{{"path", name},
                        {"size", size},
                        {"media_type", "application/octet-stream"},
                        {"host_path", std::move(host)}};
}

}  // namespace

TEST_SUITE("mcp protocol versions") {
    TEST_CASE("negotiation: the client's version when spoken, else the newest") {
        for (const char* version : {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
            CHECK(mcp::negotiate(version).version == version);
        CHECK(mcp::negotiate("2099-01-01").version == "2025-11-25");
        CHECK(mcp::negotiate("2024-10-07").version == "2025-11-25");
        CHECK(mcp::negotiate("").version == "2025-11-25");
        CHECK(&mcp::kLatestProtocol == &mcp::negotiate("2025-11-25"));
    }

    TEST_CASE("tools/list: titles, annotations and output schemas only where defined") {
        const ordered_json schema = {{"type", "object"}};
        for (const auto& tool : mcp::tool_list(kOffered, schema, protocol("2024-11-05"))) {
            CHECK_FALSE(tool.contains("title"));
            CHECK_FALSE(tool.contains("annotations"));
            CHECK_FALSE(tool.contains("outputSchema"));
            CHECK(tool["inputSchema"]["type"] == "object");
        }
        const ordered_json march = mcp::tool_list(kOffered, schema, protocol("2025-03-26"));
        CHECK(march[0]["annotations"] == ordered_json{{"title", "Run Python in a sandbox"}});
        for (const auto& tool : march) {
            CHECK_FALSE(tool.contains("title"));
            CHECK_FALSE(tool.contains("outputSchema"));
        }
        for (const char* version : {"2025-06-18", "2025-11-25"})
            for (const auto& tool : mcp::tool_list(kOffered, schema, protocol(version))) {
                CHECK(tool["title"].is_string());
                CHECK(tool["outputSchema"]["type"] == "object");
                CHECK_FALSE(tool.contains("annotations"));
            }
    }

    TEST_CASE("before 2025-06-18: no structuredContent; what only it held is in the text") {
        const mcp::Protocol& old = protocol("2025-03-26");
        ordered_json cell = cell_result("ok", "/w==", "", ordered_json::array());
        cell["encoding"]["stdout"] = "base64";
        cell["bytes"]["stdout"] = 2;
        const ordered_json result = mcp::run_result(cell, old);
        CHECK_FALSE(result.contains("structuredContent"));
        CHECK(result["isError"] == false);
        CHECK(result["content"][0]["text"] ==
              "[stdout is not UTF-8: 2 bytes, base64 follows]\n/w==\n");
        CHECK(run_latest(cell)["content"][0]["text"] ==
              "[stdout is not UTF-8: 2 bytes, base64 in structuredContent.stdout]\n");

        const ordered_json session = mcp::text_result("s", {{"session_id", "s"}}, old);
        CHECK(session == ordered_json{{"content", {{{"type", "text"}, {"text", "s"}}}}});
        CHECK(mcp::text_result("s", {{"session_id", "s"}},
                               mcp::kLatestProtocol)["structuredContent"] ==
              ordered_json{{"session_id", "s"}});
    }

    TEST_CASE("before 2025-06-18: a file too big to embed is named in text, not linked") {
        const CopiesDir copies;
        ordered_json cell = cell_result("ok", "", "", ordered_json::array());
        cell["files"].push_back(made_file("small.txt", 2, copies.write("small.txt", "hi")));
        const std::string big = copies.write("big.bin", std::string(mcp::kEmbedCap + 1, 'x'));
        cell["files"].push_back(made_file("big.bin", mcp::kEmbedCap + 1, big));
        const ordered_json content = mcp::run_result(cell, protocol("2024-11-05"))["content"];
        REQUIRE(content.size() == 3);
        CHECK(content[1]["type"] == "resource");
        CHECK(content[2]["type"] == "text");
        CHECK(content[2]["text"] ==
              "The code wrote /tmp/work/big.bin (65537 bytes, "
              "application/octet-stream), too big to include here; the "
              "server's copy: " +
                  big);
    }
}

TEST_SUITE("mcp tools") {
    TEST_CASE("tools/list: three tools, the profiles offered, the result schema as outputSchema") {
        const ordered_json schema = {{"type", "object"}, {"title", "the result"}};
        const ordered_json tools = mcp::tool_list(kOffered, schema, mcp::kLatestProtocol);
        REQUIRE(tools.size() == 3);
        CHECK(tools[0]["name"] == "run_python");
        CHECK(tools[0]["outputSchema"] == schema);
        CHECK(tools[0]["inputSchema"]["required"] == ordered_json{"code"});
        CHECK(tools[0]["inputSchema"]["properties"]["profile"]["enum"] ==
              ordered_json{"default", "datascience"});
        CHECK(tools[0]["inputSchema"]["properties"]["requirements"]["items"]["type"] == "string");
        CHECK(tools[1]["name"] == "start_session");
        CHECK(tools[1]["inputSchema"]["properties"].contains("requirements"));
        CHECK(tools[2]["inputSchema"]["required"] == ordered_json{"session_id"});
        for (const auto& tool : tools) {
            CHECK(tool["inputSchema"]["additionalProperties"] == false);
            CHECK(tool["outputSchema"]["type"] == "object");
        }
    }

    TEST_CASE("run_python's arguments: each refusal names what to fix") {
        CHECK(refusal({{"code", "1"}}).empty());
        CHECK(refusal(json::array()) == "the arguments must be an object, not array");
        CHECK(refusal({{"code", "1"}, {"cmd", "ls"}}) ==
              "unknown argument \"cmd\" (arguments: code, session_id, timeout, profile, files, "
              "requirements)");
        CHECK(refusal({{"code", "1"}, {"timeout", "2s"}}) ==
              "\"timeout\" must be a number of seconds, not string");
        CHECK(refusal({{"code", "1"}, {"profile", "network"}}) ==
              "profile \"network\" is not offered by this server (offered: default, datascience)");
        CHECK(refusal({{"code", "1"}, {"session_id", 3}}) ==
              "\"session_id\" must be a string, not number");
        CHECK(refusal({{"code", "1"}, {"session_id", "s"}, {"profile", "default"}}) ==
              "a session has its profile: give session_id or profile");
        const auto run =
            mcp::parse_run_arguments({{"code", "1"}, {"profile", "datascience"}}, kOffered);
        CHECK(run.profile == "datascience");
        CHECK_FALSE(run.session_id);
        CHECK(run.requirements.empty());
    }

    TEST_CASE("requirements: pip specs, each checked, never with a session") {
        const auto run = mcp::parse_run_arguments(
            {{"code", "1"}, {"requirements", {"tinypkg==1.0", "usespkg"}}}, kOffered);
        CHECK(run.requirements == std::vector<std::string>{"tinypkg==1.0", "usespkg"});
        CHECK(mcp::parse_run_arguments({{"code", "1"}, {"requirements", nullptr}}, kOffered)
                  .requirements.empty());
        CHECK(refusal({{"code", "1"}, {"requirements", "tinypkg"}}) ==
              "\"requirements\" must be an array of strings, not string");
        CHECK(refusal({{"code", "1"}, {"requirements", {"tinypkg", 3}}}) ==
              "\"requirements\" must be an array of strings");
        for (const char* bad : {"", "--index-url=http://x", " -e .", "a\nb"})
            CHECK(refusal({{"code", "1"}, {"requirements", {"ok", bad}}})
                      .starts_with("requirements[1]: \""));
        CHECK(refusal({{"code", "1"}, {"session_id", "s"}, {"requirements", {"tinypkg"}}})
                  .starts_with("a session has its packages"));
        CHECK(
            refusal({{"code", "1"}, {"requirements", json(std::vector<std::string>(257, "a"))}}) ==
            "\"requirements\" names 257 packages: at most 256");
        const auto start = mcp::parse_start_arguments({{"requirements", {"usespkg"}}}, kOffered);
        CHECK(start.requirements == std::vector<std::string>{"usespkg"});
        CHECK_THROWS_WITH(mcp::parse_start_arguments({{"requirements", {"-r x"}}}, kOffered),
                          doctest::Contains("requirements[0]: \"-r x\" is not a requirement"));
    }

    TEST_CASE("start_session and end_session") {
        CHECK(mcp::parse_start_arguments(json::object(), kOffered).profile == std::nullopt);
        CHECK_THROWS_WITH(mcp::parse_start_arguments({{"profile", "x"}}, kOffered),
                          "profile \"x\" is not offered by this server (offered: default, "
                          "datascience)");
        CHECK(mcp::parse_end_arguments({{"session_id", "abc"}}) == "abc");
        CHECK_THROWS_WITH(mcp::parse_end_arguments(json::object()), "\"session_id\" is missing");
    }

    TEST_CASE("the text: both streams in the order they came, then what stopped the run") {
        ordered_json order =
            ordered_json::array({segment("stdout", 2), segment("stderr", 4), segment("stdout", 2)});
        const ordered_json result =
            run_latest(cell_result("timeout", "a\nb\n", "err\n", std::move(order)));
        CHECK(result["isError"] == true);
        REQUIRE(result["content"].size() == 1);
        CHECK(result["content"][0]["text"] == "a\nerr\nb\nstopped: timeout\n");
        CHECK(result["structuredContent"]["stdout"] == "a\nb\n");
    }

    TEST_CASE("a final expression's value follows the output, as a REPL shows it") {
        ordered_json cell =
            cell_result("ok", "out", "", ordered_json::array({segment("stdout", 3)}));
        cell["value"] = "42";
        CHECK(run_latest(cell)["content"][0]["text"] == "out\n42\n");
        cell["value"] = nullptr;
        CHECK(run_latest(cell)["content"][0]["text"] == "out");
    }

    TEST_CASE("an exception's traceback is added only when stderr does not hold it") {
        ordered_json cell = cell_result("exception", "", "", ordered_json::array());
        cell["exception"] = {{"traceback", "Traceback...\nValueError: x\n"}};
        CHECK(run_latest(cell)["content"][0]["text"] == "Traceback...\nValueError: x\n");
        cell["stderr"] = "Traceback...\nValueError: x\n";
        cell["output"] =
            ordered_json::array({segment("stderr", cell["stderr"].get<std::string>().size())});
        CHECK(run_latest(cell)["content"][0]["text"] == "Traceback...\nValueError: x\n");
        CHECK(run_latest(cell)["isError"] == true);
    }

    TEST_CASE("output over the message's share keeps its head and tail, with a warning") {
        const std::string big = std::string(mcp::kOutputShown, 'h') + std::string(1000, 't');
        const ordered_json result = run_latest(
            cell_result("ok", big, "", ordered_json::array({segment("stdout", big.size())})));
        const std::string& shown =
            result["structuredContent"]["stdout"].get_ref<const std::string&>();
        CHECK(shown.size() < mcp::kOutputShown);
        CHECK(shown.starts_with("hhhh"));
        CHECK(shown.ends_with("tttt"));
        CHECK(result["structuredContent"]["truncated"]["stdout"] == true);
        CHECK(result["structuredContent"]["bytes"]["stdout"] == big.size());
        CHECK(result["structuredContent"]["warnings"].size() == 1);
        CHECK(result["content"][0]["text"] == shown);
        CHECK(result["isError"] == false);
    }

    TEST_CASE("files: embedded up to the cap (text or blob), linked beyond, skipped ones not") {
        const CopiesDir copies;
        const std::filesystem::path& dir = copies.path;
        ordered_json cell = cell_result("ok", "", "", ordered_json::array());
        cell["files"].push_back(made_file("a.txt", 2, copies.write("a.txt", "hi")));
        cell["files"].push_back(
            made_file("b.bin", 2, copies.write("b.bin", std::string("\xff\x00", 2))));
        cell["files"].push_back(
            made_file("big name.bin", mcp::kEmbedCap + 1,
                      copies.write("big name.bin", std::string(mcp::kEmbedCap + 1, 'x'))));
        cell["files"].push_back(made_file("skipped", 1, nullptr));
        const ordered_json content = run_latest(cell)["content"];
        REQUIRE(content.size() == 4);
        CHECK(content[1]["resource"]["uri"] == "file:///tmp/work/a.txt");
        CHECK(content[1]["resource"]["text"] == "hi");
        CHECK(content[2]["resource"]["blob"] == "/wA=");
        CHECK(content[3]["type"] == "resource_link");
        CHECK(content[3]["uri"] == mcp::file_uri((dir / "big name.bin").string()));
        CHECK(content[3]["uri"].get<std::string>().ends_with("/big%20name.bin"));
    }

    TEST_CASE("a file too big to embed: the server's resource, and file:// on stdio only") {
        const CopiesDir copies;
        ordered_json cell = cell_result("ok", "", "", ordered_json::array());
        const std::string big = copies.write("big.bin", std::string(mcp::kEmbedCap + 1, 'x'));
        cell["files"].push_back(made_file("big.bin", mcp::kEmbedCap + 1, big));
        const mcp::FileOffer offer = [](const ordered_json& file) {
            return "pysandbox://files/1/" + file["path"].get<std::string>();
        };
        const ordered_json stdio = mcp::run_result(cell, mcp::kLatestProtocol, offer, true);
        REQUIRE(stdio["content"].size() == 3);
        CHECK(stdio["content"][1]["uri"] == "pysandbox://files/1/big.bin");
        CHECK(stdio["content"][2]["uri"] == mcp::file_uri(big));
        const ordered_json http = mcp::run_result(cell, mcp::kLatestProtocol, offer, false);
        REQUIRE(http["content"].size() == 2);
        CHECK(http["content"][1]["uri"] == "pysandbox://files/1/big.bin");
        // Not offered (too big for a resource) and no host link: named in the text alone.
        const ordered_json neither = mcp::run_result(cell, mcp::kLatestProtocol, {}, false);
        REQUIRE(neither["content"].size() == 2);
        CHECK(neither["content"][1]["text"] ==
              "The code wrote /tmp/work/big.bin (65537 bytes, application/octet-stream), too big "
              "to include here");
    }

    TEST_CASE("file URIs percent-encode what is not plain") {
        CHECK(mcp::file_uri("/tmp/a b/ü?.txt") == "file:///tmp/a%20b/%C3%BC%3F.txt");
    }
}
