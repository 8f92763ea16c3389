#pragma once
// The MCP server's tools, apart from the server: their descriptions and schemas (the reading of
// a call's arguments is in requests.hpp), and the turning of a cell's result into a tool result
// (content blocks a model reads, and the result object as structuredContent), each as the
// negotiated protocol version defines them (mcp_protocol.hpp). Pure functions: no sandbox here.

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fronts/mcp_protocol.hpp"
#include "fronts/requests.hpp"

namespace pysandbox::mcp {

// A file the run made, at most this big, is embedded in the result; a bigger one is a
// resource_link to its host copy (before 2025-06-18: a text block naming it).
inline constexpr std::size_t kEmbedCap = 64 * 1024;
// All embedded files of one result together; past this, links.
inline constexpr std::size_t kEmbedTotal = 512 * 1024;
// stdout and stderr together, as the result shows them (they appear twice: as text and in
// structuredContent). The official SDKs drop a stdio message over 10 MiB; the run's own output
// limit still decides its status.
inline constexpr std::size_t kOutputShown = 2 * 1024 * 1024;
// The figures' PNGs (base64) of one result together (also twice).
inline constexpr std::size_t kFiguresShown = 2 * 1024 * 1024;

// tools/list's tools. `profiles`: those offered, the first the default. `result_schema`: the
// result's JSON Schema (run_python's outputSchema, where the protocol has one).
nlohmann::ordered_json tool_list(std::span<const std::string> profiles,
                                 const nlohmann::ordered_json& result_schema,
                                 const Protocol& protocol);

// A cell's result as run_python's CallToolResult: the output as text (stdout and stderr in the
// order they came, then the final expression's value, then the traceback if stderr does not hold
// it, then the one-line sandbox
// message when the sandbox stopped something), one image per figure, each file the run made
// embedded (small) or linked (its host copy), the result as structuredContent, isError unless
// the status is ok. Where the protocol has no structuredContent, the text holds what only it
// would (a stream that is not UTF-8, as base64).
//
// A file too big to embed is linked by the URI `offer` gives it (the server's own resource,
// which resources/read reads; empty: none), and, when `host_links` (stdio: client and server
// share a filesystem), by a file:// link to its host copy as well. Before 2025-06-18 a text
// block names them.
using FileOffer = std::function<std::string(const nlohmann::ordered_json& file)>;
nlohmann::ordered_json run_result(nlohmann::ordered_json result, const Protocol& protocol,
                                  const FileOffer& offer = {}, bool host_links = true);

// A tool's answer: one text block, and `structured` as structuredContent where the protocol has it.
nlohmann::ordered_json text_result(std::string text, nlohmann::ordered_json structured,
                                   const Protocol& protocol);

// A refusal the model reads: one text block, isError.
nlohmann::ordered_json tool_error(std::string_view message);

// A file:// URI for a host path (RFC 8089; what is not unreserved is percent-encoded).
std::string file_uri(std::string_view path);

}  // namespace pysandbox::mcp
