// The proxy's pure parts: request heads and its own responses. No sockets here
// (proxy/server.cpp has them), so all of it is unit-tested.

#include "proxy/proxy.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "sys/ascii.hpp"

namespace pysandbox::proxy {
namespace {

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
        if (ascii::iequals(name, hop)) return true;
    return false;
}

std::variant<ForwardPlan, Refusal> plan_tunnel(const RequestHead& request) {
    try {
        return ForwardPlan{parse_destination(request.target), true, {}};
    } catch (const std::invalid_argument& e) {
        return Refusal{400, std::string("CONNECT ") + request.target + ": " + e.what()};
    }
}

// The body a plain request has: Content-Length bytes, or none. A chunked body would need the
// proxy to read chunk by chunk to know where the request ends: refused, as is a length that is
// not one number.
std::optional<Refusal> read_body_length(const RequestHead& request, std::uint64_t& length) {
    std::optional<std::string> seen;
    for (const Header& header : request.headers) {
        if (ascii::iequals(header.name, "transfer-encoding"))
            return Refusal{501,
                           "request bodies with Transfer-Encoding are not relayed; send a "
                           "Content-Length"};
        if (!ascii::iequals(header.name, "content-length")) continue;
        if (!ascii::is_all_digits(header.value) || header.value.size() > 15 ||
            (seen && *seen != header.value))
            return Refusal{400, "Content-Length \"" + header.value + "\" is not one number"};
        seen = header.value;
    }
    length = seen ? std::stoull(*seen) : 0;
    return std::nullopt;
}

std::variant<ForwardPlan, Refusal> plan_plain_http(const RequestHead& request) {
    constexpr std::string_view kScheme = "http://";
    if (request.target.size() < kScheme.size() ||
        !ascii::iequals(std::string_view(request.target).substr(0, kScheme.size()), kScheme)) {
        if (ascii::iequals(std::string_view(request.target).substr(0, 8), "https://"))
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
    if (auto refusal = read_body_length(request, plan.body_length)) return *refusal;
    // The request names the allowed authority in its line and in Host, whatever Host the
    // script sent: an upstream that serves several names must serve the allowed one.
    std::string& head = plan.upstream_head;
    const std::string& host = plan.destination.host;
    const std::string host_field = (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                                   (has_port ? ":" + std::to_string(plan.destination.port) : "");
    head = request.method + " " + path + " " + request.version + "\r\nHost: " + host_field + "\r\n";
    for (const Header& header : request.headers) {
        if (is_hop_by_hop(header.name) || ascii::iequals(header.name, "host")) continue;
        head += header.name + ": " + header.value + "\r\n";
    }
    head += "Connection: close\r\n\r\n";  // one request per upstream connection
    return plan;
}

}  // namespace

// CR and LF appear only as CRLF; no NUL.
bool lines_end_in_crlf_only(std::string_view head) {
    for (std::size_t i = 0; i < head.size(); ++i) {
        const char c = head[i];
        if (c == '\0') return false;
        if (c == '\r' && (i + 1 == head.size() || head[i + 1] != '\n')) return false;
        if (c == '\n' && (i == 0 || head[i - 1] != '\r')) return false;
    }
    return true;
}

std::optional<RequestHead> parse_request_head(std::string_view head) {
    if (!head.ends_with("\r\n\r\n") || !lines_end_in_crlf_only(head)) return std::nullopt;
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
