#include "fronts/mcp_tools.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <stdexcept>

#include "fronts/requests.hpp"
#include "plan/host_files.hpp"
#include "plan/units.hpp"
#include "report/encoding.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox::mcp {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

ordered_json object_schema(ordered_json properties, ordered_json required) {
    return {{"type", "object"},
            {"properties", std::move(properties)},
            {"required", std::move(required)},
            {"additionalProperties", false}};
}

// The text of one stream as the result holds it (UTF-8, or base64 of bytes that are not: then a
// note, and the base64 itself where there is no structuredContent to hold it).
std::string stream_text(const ordered_json& result, const char* stream, const Protocol& protocol) {
    const std::string& text = result[stream].get_ref<const std::string&>();
    if (result["encoding"][stream] == "utf-8") return text;
    const std::string note = "[" + std::string(stream) + " is not UTF-8: " +
                             std::to_string(result["bytes"][stream].get<std::uint64_t>()) +
                             " bytes, base64 ";
    if (protocol.structured_content) return note + "in structuredContent." + stream + "]\n";
    return note + "follows]\n" + text + "\n";
}

// stdout and stderr in the order they came ("output": segments over the kept bytes).
std::string interleaved(const ordered_json& result, const Protocol& protocol) {
    const bool utf8 =
        result["encoding"]["stdout"] == "utf-8" && result["encoding"]["stderr"] == "utf-8";
    const std::string out = stream_text(result, "stdout", protocol);
    const std::string err = stream_text(result, "stderr", protocol);
    if (!utf8) return out + err;
    std::string text;
    std::size_t out_at = 0;
    std::size_t err_at = 0;
    for (const auto& segment : result["output"]) {
        const bool is_out = segment[0] == "stdout";
        const std::string& from = is_out ? out : err;
        std::size_t& at = is_out ? out_at : err_at;
        const std::size_t length = std::min(segment[1].get<std::size_t>(), from.size() - at);
        text.append(from, at, length);
        at += length;
    }
    text.append(out, out_at);
    text.append(err, err_at);
    return text;
}

// Cuts a UTF-8 string to at most `size` bytes, at a character's start.
std::size_t utf8_boundary(const std::string& text, std::size_t size) {
    size = std::min(size, text.size());
    while (size > 0 && size < text.size() &&
           (static_cast<unsigned char>(text[size]) & 0xc0) == 0x80)
        --size;
    return size;
}

// Keeps the head and the tail of each stream within kOutputShown together: the run's own
// output limit decided its status; this only keeps the message within what clients take.
void shorten_output(ordered_json& result) {
    const std::size_t out = result["stdout"].get_ref<const std::string&>().size();
    const std::size_t err = result["stderr"].get_ref<const std::string&>().size();
    if (out + err <= kOutputShown) return;
    bool cut = false;
    for (const char* stream : {"stdout", "stderr"}) {
        std::string& text = result[stream].get_ref<std::string&>();
        const std::size_t share = kOutputShown / 2;
        if (text.size() <= share) continue;
        const bool utf8 = result["encoding"][stream] == "utf-8";
        std::size_t head = share / 2;
        std::size_t tail_from = text.size() - share / 2;
        if (utf8) {
            head = utf8_boundary(text, head);
            tail_from = utf8_boundary(text, tail_from);
        } else {  // base64: whole quanta
            head -= head % 4;
            tail_from += (4 - tail_from % 4) % 4;
        }
        const std::size_t omitted = tail_from - head;
        text = text.substr(0, head) +
               (utf8 ? "\n[... " + units::format_size(omitted) +
                           " left out of this MCP result; it keeps the head and the tail ...]\n"
                     : std::string()) +
               text.substr(tail_from);
        result["truncated"][stream] = true;
        cut = true;
    }
    if (!cut) return;
    // The segments no longer fit the kept text: one per stream.
    ordered_json order = ordered_json::array();
    for (const char* stream : {"stdout", "stderr"})
        if (const std::size_t n = result[stream].get_ref<const std::string&>().size(); n > 0)
            order.push_back({stream, n});
    result["output"] = std::move(order);
    result["warnings"].push_back("the output was shortened to " + units::format_size(kOutputShown) +
                                 " for the MCP message (the SDKs take at most 10 MiB)");
}

void shorten_figures(ordered_json& result) {
    auto& figures = result["figures"];
    std::size_t total = 0;
    std::size_t kept = 0;
    for (; kept < figures.size(); ++kept) {
        total += figures[kept]["data"].get_ref<const std::string&>().size();
        if (total > kFiguresShown) break;
    }
    if (kept == figures.size()) return;
    const std::size_t dropped = figures.size() - kept;
    figures.erase(figures.begin() + static_cast<std::ptrdiff_t>(kept), figures.end());
    result["warnings"].push_back(std::to_string(dropped) + " figure(s) left out: an MCP result " +
                                 "holds at most " + units::format_size(kFiguresShown) + " of PNG");
}

// A host copy the collector made (a regular file in a directory of the server's), read whole
// when it is at most `cap` bytes.
std::optional<std::string> read_copy(const std::string& path, std::size_t cap) {
    HostFile file = read_host_file(path, cap, O_NOFOLLOW);
    if (file.problem != HostFile::Problem::none) return std::nullopt;
    return std::move(file.data);
}

// The blocks of one file the run made: embedded when small enough, else linked.
void file_blocks(const ordered_json& file, std::size_t& embedded, const Protocol& protocol,
                 const FileOffer& offer, bool host_links, ordered_json& content) {
    const std::string uri_in_sandbox = "file:///tmp/work/" + file["path"].get<std::string>();
    const auto& host_path = file["host_path"];
    const std::uint64_t size = file["size"].get<std::uint64_t>();
    if (!host_path.is_string()) return;  // not copied (file["skipped"] says why)
    const std::string path = host_path.get<std::string>();
    if (size <= kEmbedCap && embedded + size <= kEmbedTotal) {
        if (auto data = read_copy(path, kEmbedCap)) {
            embedded += data->size();
            ordered_json resource = {{"uri", uri_in_sandbox}, {"mimeType", file["media_type"]}};
            if (encoding::is_utf8(*data))
                resource["text"] = std::move(*data);
            else
                resource["blob"] = encoding::base64(*data);
            content.push_back({{"type", "resource"}, {"resource", std::move(resource)}});
            return;
        }
    }
    const std::string server_uri = offer ? offer(file) : std::string();
    // Named in text where there is no link to give, or no resource_link to give it in.
    if (!protocol.resource_links || (server_uri.empty() && !host_links)) {
        std::string text = "The code wrote /tmp/work/" + file["path"].get<std::string>() + " (" +
                           std::to_string(size) + " bytes, " +
                           file["media_type"].get<std::string>() + "), too big to include here";
        if (!server_uri.empty()) text += "; read it as resource " + server_uri;
        if (host_links) text += "; the server's copy: " + path;
        content.push_back({{"type", "text"}, {"text", std::move(text)}});
        return;
    }
    for (const std::string& uri : {server_uri, host_links ? file_uri(path) : std::string()})
        if (!uri.empty())
            content.push_back({{"type", "resource_link"},
                               {"uri", uri},
                               {"name", file["path"]},
                               {"mimeType", file["media_type"]},
                               {"size", size}});
}

// The requirements argument: run_python's and start_session's.
ordered_json requirements_input(std::string_view what) {
    return {{"type", "array"},
            {"items", {{"type", "string"}, {"minLength", 1}}},
            {"maxItems", kMaxRequirements},
            {"description",
             "Python packages " + std::string(what) +
                 " needs beyond the standard library and the profile's, as pip requirement "
                 "specifiers (\"requests\", \"numpy>=1.26\"). They are installed inside a "
                 "sandbox from the operator's package sources, the first time (seconds), and "
                 "mounted read-only; the same list later is ready at once. A package that cannot "
                 "be installed answers with status install_error."}};
}

// run_python's inputSchema; `profile`: the profile argument's schema.
ordered_json run_python_input(const ordered_json& profile) {
    ordered_json file = object_schema(
        {{"name", {{"type", "string"}, {"description", "A plain file name (no '/')"}}},
         {"text", {{"type", "string"}, {"description", "The content, as text"}}},
         {"base64", {{"type", "string"}, {"description", "The content, base64"}}}},
        {"name"});
    ordered_json run_input = object_schema(
        {{"code",
          {{"type", "string"},
           {"description",
            "Python 3 source. The value of a final expression comes back as `value`, as a "
            "REPL shows it."}}},
         {"session_id",
          {{"type", "string"},
           {"description",
            "Run in this session (from start_session): variables, imports and the files in "
            "/tmp/work stay for later calls. Without it the code runs in a fresh sandbox that "
            "is discarded afterwards."}}},
         {"timeout",
          {{"type", "number"},
           {"exclusiveMinimum", 0},
           {"description",
            "Seconds the code may run (default and most: the profile's wall-clock limit)"}}},
         {"profile", profile},
         {"files",
          {{"type", "array"},
           {"items", file},
           {"description",
            "Files placed in /tmp/work (the working directory) before the code "
            "runs; in a session they stay"}}},
         {"requirements", requirements_input("the code (without session_id; a session has "
                                             "those start_session gave it)")}},
        {"code"});
    return run_input;
}

// One tool as `protocol` defines it: its title where the protocol has a place for one, its output
// schema where it has structured results.
ordered_json tool(std::string_view name, std::string_view title, std::string_view description,
                  ordered_json input_schema, ordered_json output_schema, const Protocol& protocol) {
    ordered_json tool = {{"name", name}};
    if (protocol.titles) tool["title"] = title;
    tool["description"] = description;
    tool["inputSchema"] = std::move(input_schema);
    if (protocol.structured_content) tool["outputSchema"] = std::move(output_schema);
    if (protocol.tool_annotations && !protocol.titles) tool["annotations"] = {{"title", title}};
    return tool;
}

}  // namespace

ordered_json tool_list(std::span<const std::string> profiles, const ordered_json& result_schema,
                       const Protocol& protocol) {
    ordered_json profile = {{"type", "string"},
                            {"enum", profiles},
                            {"description", "The sandbox profile (default: " + profiles.front() +
                                                "). Only those the operator offers."}};
    ordered_json run_input = run_python_input(profile);
    ordered_json id = {{"type", "string"}, {"description", "A session from start_session"}};
    return ordered_json::array(
        {tool("run_python", "Run Python in a sandbox",
              "Runs Python 3 in an isolated sandbox: no network unless the profile allows it, "
              "no access to the host's files, only /tmp writable, with time, memory and output "
              "limits. Returns the output, the value of a final expression, the exception if one "
              "was raised, each open matplotlib figure as an image, and the files the code wrote "
              "in its working directory /tmp/work. Use a session (start_session) to keep "
              "variables between calls. Packages the code imports that are not there can be "
              "asked for with requirements.",
              std::move(run_input), result_schema, protocol),
         tool("start_session", "Start a Python session",
              "Starts a sandboxed Python interpreter that keeps its variables, imports and files "
              "across run_python calls given its session_id, like a notebook. End it with "
              "end_session. Give requirements to have packages installed for it.",
              object_schema({{"profile", profile},
                             {"requirements", requirements_input("the session's code")}},
                            ordered_json::array()),
              object_schema({{"session_id", id}}, {"session_id"}), protocol),
         tool("end_session", "End a Python session", "Ends a session and everything in it.",
              object_schema({{"session_id", id}}, {"session_id"}),
              object_schema({{"session_id", id}, {"ended", {{"type", "boolean"}}}},
                            {"session_id", "ended"}),
              protocol)});
}

ordered_json run_result(ordered_json result, const Protocol& protocol, const FileOffer& offer,
                        bool host_links) {
    shorten_output(result);
    shorten_figures(result);
    std::string text = interleaved(result, protocol);
    // The final expression's value, as a REPL shows it after the output.
    if (const auto value = result.find("value"); value != result.end() && value->is_string()) {
        if (!text.empty() && text.back() != '\n') text += '\n';
        text += value->get<std::string>() + "\n";
    }
    const auto& exception = result["exception"];
    if (exception.is_object()) {
        const std::string& traceback = exception["traceback"].get_ref<const std::string&>();
        if (result["stderr"].get_ref<const std::string&>().find(traceback) == std::string::npos)
            text += traceback;
    }
    const std::string status = result["status"].get<std::string>();
    if (status != "ok" && status != "exception" && result["message"].is_string()) {
        if (!text.empty() && text.back() != '\n') text += '\n';
        text += result["message"].get<std::string>() + "\n";
    }
    ordered_json content = ordered_json::array({{{"type", "text"}, {"text", std::move(text)}}});
    for (const auto& figure : result["figures"])
        content.push_back({{"type", "image"}, {"data", figure["data"]}, {"mimeType", "image/png"}});
    std::size_t embedded = 0;
    for (const auto& file : result["files"])
        file_blocks(file, embedded, protocol, offer, host_links, content);
    const bool failed = status != "ok";
    ordered_json answer = {{"content", std::move(content)}};
    if (protocol.structured_content) answer["structuredContent"] = std::move(result);
    answer["isError"] = failed;
    return answer;
}

ordered_json text_result(std::string text, ordered_json structured, const Protocol& protocol) {
    ordered_json answer = {
        {"content", ordered_json::array({{{"type", "text"}, {"text", std::move(text)}}})}};
    if (protocol.structured_content) answer["structuredContent"] = std::move(structured);
    return answer;
}

ordered_json tool_error(std::string_view message) {
    return {{"content", ordered_json::array({{{"type", "text"}, {"text", message}}})},
            {"isError", true}};
}

std::string file_uri(std::string_view path) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string uri = "file://";
    for (unsigned char c : path) {
        if (std::isalnum(c) || c == '/' || c == '-' || c == '.' || c == '_' || c == '~') {
            uri += static_cast<char>(c);
        } else {
            uri += '%';
            uri += kHex[c >> 4];
            uri += kHex[c & 15];
        }
    }
    return uri;
}

}  // namespace pysandbox::mcp
