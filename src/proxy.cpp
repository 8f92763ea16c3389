// The proxy's pure parts: allowlist rules, destinations, request heads, and its own responses.
// No sockets here (proxy_server.cpp has them), so all of it is unit-tested.

#include "proxy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <stdexcept>

namespace pysandbox::proxy {
namespace {

constexpr std::size_t kMaxHostName = 253;
constexpr std::size_t kMaxLabel = 63;

std::string lowercase(std::string_view text) {
    std::string out(text);
    std::ranges::transform(out, out.begin(), [](unsigned char c) { return std::tolower(c); });
    return out;
}

bool iequals(std::string_view a, std::string_view b) {
    return lowercase(a) == lowercase(b);
}

bool is_label_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
}

bool is_all_digits(std::string_view text) {
    return !text.empty() && std::ranges::all_of(text, [](char c) { return c >= '0' && c <= '9'; });
}

// A DNS name: dot-separated labels of letters, digits, '-' and '_'. The last label may not be
// all digits: "127.1" or "10.0.0.010" would be read as an address by the resolver, and must not
// slip past rules written for names.
bool is_host_name(std::string_view name) {
    if (name.empty() || name.size() > kMaxHostName) return false;
    std::string_view last;
    for (std::size_t start = 0; start <= name.size();) {
        std::size_t dot = std::min(name.find('.', start), name.size());
        std::string_view label = name.substr(start, dot - start);
        if (label.empty() || label.size() > kMaxLabel || label.front() == '-' ||
            label.back() == '-' || !std::ranges::all_of(label, is_label_char))
            return false;
        last = label;
        start = dot + 1;
    }
    return !is_all_digits(last);
}

// The canonical text of an IP address, or nullopt when `text` is not one.
std::optional<std::string> canonical_ip(const std::string& text, int family) {
    unsigned char binary[sizeof(in6_addr)];
    char out[INET6_ADDRSTRLEN];
    if (::inet_pton(family, text.c_str(), binary) != 1) return std::nullopt;
    if (::inet_ntop(family, binary, out, sizeof out) == nullptr) return std::nullopt;
    return std::string(out);
}

std::uint16_t parse_port(std::string_view text) {
    if (!is_all_digits(text) || text.size() > 5)
        throw std::invalid_argument("port \"" + std::string(text) + "\" is not a number");
    unsigned long port = std::stoul(std::string(text));
    if (port < 1 || port > 65535)
        throw std::invalid_argument("port " + std::string(text) + " is outside 1-65535");
    return static_cast<std::uint16_t>(port);
}

struct HostPort {
    std::string_view host;
    std::string_view port;
    bool bracketed = false;
};

HostPort split_host_port(std::string_view text) {
    if (text.starts_with('[')) {
        std::size_t close = text.find(']');
        if (close == std::string_view::npos || text.substr(close + 1, 1) != ":")
            throw std::invalid_argument("expected [IPV6]:PORT");
        return {text.substr(1, close - 1), text.substr(close + 2), true};
    }
    std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) throw std::invalid_argument("expected HOST:PORT");
    std::string_view host = text.substr(0, colon);
    if (host.find(':') != std::string_view::npos)
        throw std::invalid_argument("an IPv6 address needs brackets, e.g. [::1]:8080");
    return {host, text.substr(colon + 1), false};
}

Destination make_destination(const HostPort& parts) {
    Destination destination;
    destination.port = parse_port(parts.port);
    std::string host(parts.host);
    if (parts.bracketed) {
        auto ip = canonical_ip(host, AF_INET6);
        if (!ip) throw std::invalid_argument("\"" + host + "\" is not an IPv6 address");
        return {*ip, destination.port, true};
    }
    if (auto ip = canonical_ip(host, AF_INET)) return {*ip, destination.port, true};
    host = lowercase(host);
    if (host.ends_with('.')) host.pop_back();  // the fully qualified spelling of the same name
    if (!is_host_name(host))
        throw std::invalid_argument("\"" + std::string(parts.host) + "\" is not a host name");
    return {host, destination.port, false};
}

std::string bracket_if_ipv6(const std::string& host) {
    return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    return text;
}

bool is_token(std::string_view text) {
    return !text.empty() && std::ranges::all_of(text, [](unsigned char c) {
        return std::isalnum(c) ||
               std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    });
}

std::optional<RequestHead> parse_request_line(std::string_view line) {
    std::size_t first = line.find(' ');
    std::size_t second = line.rfind(' ');
    if (first == std::string_view::npos || first == second) return std::nullopt;
    RequestHead request;
    request.method = line.substr(0, first);
    request.target = line.substr(first + 1, second - first - 1);
    request.version = line.substr(second + 1);
    if (!is_token(request.method) || request.target.empty() ||
        request.target.find(' ') != std::string::npos ||
        (request.version != "HTTP/1.1" && request.version != "HTTP/1.0"))
        return std::nullopt;
    return request;
}

// Hop-by-hop headers (RFC 9110 7.6.1) and the proxy's own: never forwarded upstream.
bool is_hop_by_hop(std::string_view name) {
    for (std::string_view hop :
         {"connection", "proxy-connection", "keep-alive", "proxy-authorization",
          "proxy-authenticate", "te", "trailer", "upgrade"})
        if (iequals(name, hop)) return true;
    return false;
}

std::variant<ForwardPlan, Refusal> plan_tunnel(const RequestHead& request) {
    try {
        return ForwardPlan{parse_destination(request.target), true, {}};
    } catch (const std::invalid_argument& e) {
        return Refusal{400, std::string("CONNECT ") + request.target + ": " + e.what()};
    }
}

std::variant<ForwardPlan, Refusal> plan_plain_http(const RequestHead& request) {
    constexpr std::string_view kScheme = "http://";
    if (request.target.size() < kScheme.size() ||
        !iequals(std::string_view(request.target).substr(0, kScheme.size()), kScheme)) {
        if (iequals(std::string_view(request.target).substr(0, 8), "https://"))
            return Refusal{400, "https:// goes through CONNECT (set HTTPS_PROXY)"};
        return Refusal{400, "not a proxy request: expected CONNECT or an absolute http:// URI"};
    }
    std::string_view rest = std::string_view(request.target).substr(kScheme.size());
    std::size_t end = std::min(rest.find_first_of("/?#"), rest.size());
    std::string authority(rest.substr(0, end));
    std::string path(rest.substr(end));
    path = path.substr(0, path.find('#'));
    if (path.empty() || path.front() != '/') path.insert(0, "/");
    if (authority.find('@') != std::string::npos)
        return Refusal{400, "user information in the URI is not supported"};
    const bool has_port =
        !authority.empty() && authority.back() != ']' && authority.find(':') != std::string::npos;
    ForwardPlan plan;
    try {
        plan.destination = parse_destination(has_port ? authority : authority + ":80");
    } catch (const std::invalid_argument& e) {
        return Refusal{400, request.target + ": " + e.what()};
    }
    std::string& head = plan.upstream_head;
    head = request.method + " " + path + " " + request.version + "\r\n";
    bool has_host = false;
    for (const Header& header : request.headers) {
        if (is_hop_by_hop(header.name)) continue;
        has_host = has_host || iequals(header.name, "host");
        head += header.name + ": " + header.value + "\r\n";
    }
    if (!has_host) head += "Host: " + authority + "\r\n";
    head += "Connection: close\r\n\r\n";  // one request per upstream connection
    return plan;
}

}  // namespace

std::string Destination::to_string() const {
    return bracket_if_ipv6(host) + ":" + std::to_string(port);
}

bool Destination::is_localhost() const {
    return !is_ip_literal && (host == "localhost" || host.ends_with(".localhost"));
}

bool reaches_local_network(const sockaddr& address) {
    if (address.sa_family == AF_INET) {
        const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
        const std::uint32_t ip = ntohl(v4.sin_addr.s_addr);
        return (ip >> 24) == 127 || ip == 0 || (ip >> 16) == 0xa9fe;  // 127/8, 0.0.0.0, 169.254/16
    }
    if (address.sa_family != AF_INET6) return false;
    const in6_addr& ip = reinterpret_cast<const sockaddr_in6&>(address).sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&ip)) {
        sockaddr_in mapped{};
        mapped.sin_family = AF_INET;
        std::memcpy(&mapped.sin_addr, &ip.s6_addr[12], 4);
        return reaches_local_network(reinterpret_cast<const sockaddr&>(mapped));
    }
    return IN6_IS_ADDR_LOOPBACK(&ip) || IN6_IS_ADDR_UNSPECIFIED(&ip) || IN6_IS_ADDR_LINKLOCAL(&ip);
}

Destination parse_destination(std::string_view text) {
    return make_destination(split_host_port(text));
}

std::string AllowRule::to_string() const {
    return (wildcard ? "*." + host : bracket_if_ipv6(host)) + ":" + std::to_string(port);
}

bool AllowRule::matches(const Destination& destination) const {
    if (destination.port != port) return false;
    if (!wildcard) return destination.host == host;
    return !destination.is_ip_literal && destination.host.size() > host.size() + 1 &&
           destination.host.ends_with("." + host);
}

AllowRule parse_allow_rule(std::string_view text) {
    if (text.starts_with("*.")) {
        HostPort parts = split_host_port(text.substr(2));
        Destination suffix = make_destination(parts);
        if (suffix.is_ip_literal || parts.bracketed)
            throw std::invalid_argument("a wildcard needs a domain name after \"*.\"");
        return {suffix.host, true, suffix.port};
    }
    if (text.find('*') != std::string_view::npos)
        throw std::invalid_argument(
            "'*' is only allowed as a whole first label, as in *.example.net:443");
    Destination destination = parse_destination(text);
    return {destination.host, false, destination.port};
}

Allowlist Allowlist::parse(const std::vector<std::string>& entries) {
    std::vector<AllowRule> rules;
    for (const auto& entry : entries) {
        try {
            rules.push_back(parse_allow_rule(entry));
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument("\"" + entry + "\": " + e.what());
        }
    }
    return Allowlist(std::move(rules));
}

bool Allowlist::allows(const Destination& destination) const {
    return std::ranges::any_of(rules_, [&](const AllowRule& r) { return r.matches(destination); });
}

std::string Allowlist::describe() const {
    std::string out;
    for (const auto& rule : rules_) out += (out.empty() ? "" : ", ") + rule.to_string();
    return out.empty() ? "(none)" : out;
}

std::optional<RequestHead> parse_request_head(std::string_view head) {
    if (!head.ends_with("\r\n\r\n")) return std::nullopt;
    head.remove_suffix(2);  // each line below, the last included, ends with its own CRLF
    std::size_t eol = head.find("\r\n");
    std::optional<RequestHead> request = parse_request_line(head.substr(0, eol));
    if (!request) return std::nullopt;
    for (std::size_t start = eol + 2; start < head.size(); start = eol + 2) {
        eol = head.find("\r\n", start);
        std::string_view line = head.substr(start, eol - start);
        std::size_t colon = line.find(':');
        // A line starting with white space is obsolete folding: refused, as RFC 9112 allows.
        if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
            return std::nullopt;
        request->headers.push_back(
            {std::string(line.substr(0, colon)), std::string(trim(line.substr(colon + 1)))});
    }
    return request;
}

std::variant<ForwardPlan, Refusal> plan_forward(const RequestHead& request) {
    return request.method == "CONNECT" ? plan_tunnel(request) : plan_plain_http(request);
}

std::string http_response(int status, std::string_view reason, std::string_view body) {
    return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) +
           "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + std::string(body);
}

std::string denial_response(const Destination& destination, const Allowlist& allowlist) {
    return http_response(
        403, "Forbidden",
        "pysandbox: the sandbox policy blocked the connection to " + destination.to_string() +
            ": it is not in the network allowlist.\nAllowed destinations: " + allowlist.describe() +
            "\n");
}

}  // namespace pysandbox::proxy
