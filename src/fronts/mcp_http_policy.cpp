#include "fronts/mcp_http_policy.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstdint>

namespace pysandbox::mcp {

std::optional<ListenAddress> parse_listen_address(std::string_view text) {
    ListenAddress address{"127.0.0.1", 0};
    std::string_view port = text;
    if (const auto colon = text.rfind(':'); colon != std::string_view::npos) {
        std::string_view host = text.substr(0, colon);
        port = text.substr(colon + 1);
        if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
            host = host.substr(1, host.size() - 2);
        else if (host.find(':') != std::string_view::npos)
            return std::nullopt;  // an IPv6 address goes in brackets
        address.host = std::string(host);
        unsigned char bytes[16];
        if (address.host != "localhost" && inet_pton(AF_INET, address.host.c_str(), bytes) != 1 &&
            inet_pton(AF_INET6, address.host.c_str(), bytes) != 1)
            return std::nullopt;
    }
    const char* end = port.data() + port.size();
    const auto parsed = std::from_chars(port.data(), end, address.port);
    if (port.empty() || parsed.ec != std::errc() || parsed.ptr != end || address.port < 0 ||
        address.port > 65535)
        return std::nullopt;
    return address;
}

bool is_loopback(std::string_view host) {
    if (host == "localhost" || host == "::1") return true;
    unsigned char bytes[4];
    const std::string text(host);
    return inet_pton(AF_INET, text.c_str(), bytes) == 1 && bytes[0] == 127;
}

bool origin_allowed(std::string_view origin, int port, const std::vector<std::string>& allowed) {
    if (std::ranges::find(allowed, origin) != allowed.end()) return true;
    const std::string suffix = ":" + std::to_string(port);
    for (const std::string_view host : {"127.0.0.1", "localhost", "[::1]"})
        if (origin == "http://" + std::string(host) + suffix) return true;
    return false;
}

bool bearer_matches(std::string_view authorization, std::string_view expected) {
    constexpr std::string_view kScheme = "Bearer ";
    if (expected.empty() || !authorization.starts_with(kScheme)) return false;
    const std::string_view token = authorization.substr(kScheme.size());
    // Every byte of `expected` is looked at, whatever the token; its length is no secret.
    std::uint8_t difference = token.size() == expected.size() ? 0 : 1;
    for (std::size_t i = 0; i < expected.size(); ++i)
        difference |= static_cast<std::uint8_t>(expected[i] ^ (i < token.size() ? token[i] : 0));
    return difference == 0;
}

}  // namespace pysandbox::mcp
