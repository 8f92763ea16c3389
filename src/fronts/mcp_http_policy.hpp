#pragma once
// What an MCP Streamable HTTP transport decides before a request reaches the server, as pure
// functions: where it listens ([ADDR:]PORT), whether that is loopback, whether a request's Origin
// may come in (DNS rebinding: a page elsewhere must not reach a server on this host), and the
// bearer token's comparison, in time that does not depend on where the tokens differ.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pysandbox::mcp {

struct ListenAddress {
    std::string host;  // as bind(2) takes it: "127.0.0.1", "::1", "0.0.0.0"
    int port = 0;      // 0: the kernel picks one
};

// "PORT", "ADDR:PORT" or "[IPV6]:PORT"; without an address, 127.0.0.1. Nothing: a bad one.
std::optional<ListenAddress> parse_listen_address(std::string_view text);

// 127.0.0.0/8, ::1 and localhost.
bool is_loopback(std::string_view host);

// An Origin header may come in when it names this host's loopback at the server's own port
// (http://127.0.0.1:PORT, http://localhost:PORT, http://[::1]:PORT) or is one of `allowed`
// exactly. A request without one (not from a browser) is not judged by it.
bool origin_allowed(std::string_view origin, int port, const std::vector<std::string>& allowed);

// The token of an "Authorization: Bearer TOKEN" header equals `expected`, compared in constant
// time for a given length of `expected`.
bool bearer_matches(std::string_view authorization, std::string_view expected);

}  // namespace pysandbox::mcp
