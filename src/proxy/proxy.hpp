#pragma once
// Network mode "proxy": the script's only way out is an HTTP proxy that pysandbox runs in the
// supervisor, outside the sandbox. The listening socket is created inside the sandbox's network
// namespace (127.0.0.1:kListenPort) and handed out over the report socket, so the script's side
// of every connection lives in the sandbox's namespace and the upstream side in the host's; there
// is no helper process inside for the script to tamper with.
//
// The pure parts (HTTP request heads, the proxy's own responses; the allowlist is in
// allowlist.hpp) are declared first and are unit-tested; the Proxy class at the end owns the
// sockets and a thread with its own poll loop.

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

#include "proxy/allowlist.hpp"
#include "sys/unique_fd.hpp"
#include "wire/sandbox_paths.hpp"

namespace pysandbox::proxy {

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
// Returns nullopt when it is not a well-formed HTTP/1.x request head: lines end in CRLF and
// nowhere else (a bare CR or LF could make the upstream read a header the proxy did not see).
std::optional<RequestHead> parse_request_head(std::string_view head);

// What the proxy does with one request.
struct ForwardPlan {
    Destination destination;
    bool tunnel = false;            // CONNECT: answer 200, then relay bytes both ways
    std::string upstream_head;      // plain HTTP: the head to send upstream (origin-form, Host the
                                    // allowed authority, no proxy headers, Connection: close)
    std::uint64_t body_length = 0;  // plain HTTP: request body bytes relayed after the head;
                                    // whatever follows them (a pipelined request) is not
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

    // Stops the thread, closes every connection; returns "host:port" -> times denied since the
    // last take_blocked().
    std::map<std::string, std::uint64_t> stop();
    // "host:port" -> times denied so far; the count starts again from zero.
    std::map<std::string, std::uint64_t> take_blocked();

  private:
    struct Server;
    std::unique_ptr<Server> server_;
};

}  // namespace pysandbox::proxy
