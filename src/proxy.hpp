#pragma once
// Network mode "proxy": the script's only way out is an HTTP proxy that pysandbox runs in the
// supervisor, outside the sandbox. The listening socket is created inside the sandbox's network
// namespace (127.0.0.1:kListenPort) and handed out over the report socket, so the script's side
// of every connection lives in the sandbox's namespace and the upstream side in the host's; there
// is no helper process inside for the script to tamper with.
//
// The pure parts (allowlist rules and matching, HTTP request heads, the proxy's own responses)
// are declared first and are unit-tested; the Proxy class at the end owns the sockets and a
// thread with its own poll loop.

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "sys/unique_fd.hpp"

namespace pysandbox::proxy {

// Where the proxy listens inside the sandbox, and what HTTP(S)_PROXY say.
inline constexpr std::uint16_t kListenPort = 3128;
inline constexpr std::string_view kProxyUrl = "http://127.0.0.1:3128";

// ---------------------------------------------------------------- destinations and the allowlist

// A host and port as the script asked for them. `host` is lowercase without a trailing dot; an
// IP literal is in its canonical text form (IPv6 without brackets).
struct Destination {
    std::string host;
    std::uint16_t port = 0;
    bool is_ip_literal = false;

    // "host:port", "[v6]:port": the key of Outcome::blocked_connections.
    std::string to_string() const;
    // "localhost" or a name under it: names the host resolves to itself by convention.
    bool is_localhost() const;
    bool operator==(const Destination&) const = default;
};

// Whether an address is this host (loopback, 0.0.0.0, ::, IPv4-mapped loopback) or link-local
// (169.254/16 with cloud metadata services, fe80::/10). A name in the allowlist never leads
// there, only an IP literal or localhost does: otherwise whoever controls an allowed name's DNS
// could point it at the host's own services.
bool reaches_local_network(const sockaddr& address);

// "host:port" or "[v6]:port", the port required. Throws std::invalid_argument saying what is
// wrong.
Destination parse_destination(std::string_view text);

// One network.allow entry: a host name, "*.suffix" (subdomains of suffix only, at any depth), or
// an IP literal; and exactly one port.
struct AllowRule {
    std::string host;  // for a wildcard, the suffix without "*."
    bool wildcard = false;
    std::uint16_t port = 0;

    std::string to_string() const;
    bool matches(const Destination& destination) const;
};

// Throws std::invalid_argument saying what is wrong with the entry.
AllowRule parse_allow_rule(std::string_view text);

class Allowlist {
  public:
    Allowlist() = default;
    explicit Allowlist(std::vector<AllowRule> rules) : rules_(std::move(rules)) {}
    // Throws std::invalid_argument naming the bad entry.
    static Allowlist parse(const std::vector<std::string>& entries);

    // By name, never by address: "localhost:80" does not allow "127.0.0.1:80".
    bool allows(const Destination& destination) const;
    // "api.example.org:443, *.example.net:80", or "(none)".
    std::string describe() const;
    const std::vector<AllowRule>& rules() const { return rules_; }

  private:
    std::vector<AllowRule> rules_;
};

// ---------------------------------------------------------------- HTTP request heads

struct Header {
    std::string name;
    std::string value;
};

struct RequestHead {
    std::string method;
    std::string target;   // as sent: "host:443" for CONNECT, "http://host/path" otherwise
    std::string version;  // "HTTP/1.1"
    std::vector<Header> headers;
};

// Parses a request head (the request line and headers, up to and including the empty line).
// Returns nullopt when it is not a well-formed HTTP/1.x request head.
std::optional<RequestHead> parse_request_head(std::string_view head);

// What the proxy does with one request.
struct ForwardPlan {
    Destination destination;
    bool tunnel = false;        // CONNECT: answer 200, then relay bytes both ways
    std::string upstream_head;  // plain HTTP: the head to send upstream (origin-form, no proxy
                                // headers, Connection: close)
};

// The proxy's answer to a request it cannot serve: status and why.
struct Refusal {
    int status;
    std::string reason;
};

// CONNECT host:port, or an absolute http:// URI. A Refusal for anything else (https:// without
// CONNECT, origin-form targets, user info in the URI, bad hosts).
std::variant<ForwardPlan, Refusal> plan_forward(const RequestHead& request);

// "HTTP/1.1 <status> <reason>" with a plain-text body and Connection: close.
std::string http_response(int status, std::string_view reason, std::string_view body);

// The 403 for a destination the allowlist does not name: says the sandbox policy blocked it and
// what is allowed.
std::string denial_response(const Destination& destination, const Allowlist& allowlist);

// ---------------------------------------------------------------- the running proxy

struct Limits {
    std::size_t max_connections = 32;  // at once; more are answered 503
    std::uint64_t max_bytes_per_connection = 64ULL << 20;
    std::uint64_t max_bytes_total = 256ULL << 20;  // both directions, every connection
    std::chrono::milliseconds idle_timeout{30'000};
    std::chrono::milliseconds connect_timeout{10'000};
    std::size_t max_head_bytes = 16 * 1024;
};

// Serves the listening socket on its own thread until stop() or destruction. The supervisor
// creates it when the sandbox hands out the socket and stops it when the run ends; nothing of
// it outlives the object (a name lookup still running is abandoned, never waited for).
class Proxy {
  public:
    Proxy(sys::UniqueFd listener, Allowlist allowlist, Limits limits = {});
    ~Proxy();
    Proxy(const Proxy&) = delete;
    Proxy& operator=(const Proxy&) = delete;

    // Stops the thread, closes every connection; returns "host:port" -> times denied.
    std::map<std::string, std::uint64_t> stop();

  private:
    struct Server;
    std::unique_ptr<Server> server_;
};

}  // namespace pysandbox::proxy
