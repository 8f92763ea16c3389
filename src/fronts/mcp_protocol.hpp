#pragma once
// The MCP protocol versions the server speaks, and what each of them defines of what the server
// sends (modelcontextprotocol/schema/VERSION/schema.ts and each version's changelog). One row a
// version: the server shapes its answers by these flags, never by comparing version strings.
// Text, images and embedded resources are in every version. Audio content came with 2025-03-26,
// icons and Implementation.description with 2025-11-25: the server sends none of them.

#include <algorithm>
#include <iterator>
#include <string_view>

namespace pysandbox::mcp {

struct Protocol {
    std::string_view version;
    // Tool.annotations (2025-03-26). Where Tool.title is missing, its title is the tool's.
    bool tool_annotations;
    // ProgressNotification.message (2025-03-26): a call's output streamed as progress. Before,
    // a progress notification carries numbers only, so the server sends none.
    bool progress_messages;
    // `title` on Tool and on Implementation (serverInfo) (2025-06-18).
    bool titles;
    // Tool.outputSchema and CallToolResult.structuredContent (2025-06-18).
    bool structured_content;
    // resource_link content blocks (2025-06-18); before, a file too big to embed is named in text.
    bool resource_links;
    // Tool arguments the server cannot run with are a tool error the model reads (isError), not
    // the JSON-RPC error -32602 of the versions before (SEP-1303, 2025-11-25).
    bool argument_errors_as_results;
    // JSON-RPC batches received (an array of requests and notifications, answered by an array):
    // 2025-03-26 made them a MUST and 2025-06-18 removed them. 2024-11-05 names none, but says
    // every message follows JSON-RPC 2.0, which has them: the server takes them there too.
    bool batches;
};

// Oldest first.
inline constexpr Protocol kProtocols[] = {
    {"2024-11-05", false, false, false, false, false, false, true},
    {"2025-03-26", true, true, false, false, false, false, true},
    {"2025-06-18", true, true, true, true, true, false, false},
    {"2025-11-25", true, true, true, true, true, true, false},
};
inline constexpr const Protocol& kLatestProtocol = kProtocols[std::size(kProtocols) - 1];

// MCP lifecycle, "Version Negotiation": the version the client asked for when the server speaks
// it, else the latest (the client disconnects if it cannot speak that one).
constexpr const Protocol& negotiate(std::string_view asked) {
    const auto* found = std::ranges::find(kProtocols, asked, &Protocol::version);
    return found != std::end(kProtocols) ? *found : kLatestProtocol;
}

}  // namespace pysandbox::mcp
