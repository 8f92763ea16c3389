#pragma once
// `pysandbox mcp --http`: the MCP "Streamable HTTP" transport (2025-03-26 and later), in the
// server's own poll loop: no threads. Boost.Beast parses each request from the bytes a
// non-blocking socket gave (http::request_parser) and serializes each response
// (http::serializer, chunked for SSE); this file only moves bytes and decides.
//
// One endpoint, /mcp. POST carries one JSON-RPC message: a request's answer comes back as
// application/json, or as an SSE stream (text/event-stream) when it asked for progress (its
// notifications go first); a notification or a response gets 202. A client whose protocol
// version has JSON-RPC batches (2024-11-05, 2025-03-26) may POST an array: it is one exchange,
// whose answer is the server's array (or 202, when it holds no request). A client that closes
// its connection before its answer came abandons the exchange: the server hears it (Inbound::gone)
// and cancels what it ran. DELETE ends a client's
// session (its Mcp-Session-Id, given at initialize and required after). GET is 405: the server
// sends nothing unasked. Before anything reaches the server, every request is judged here
// (mcp_http_policy.hpp): its Origin, its bearer token, its session, its size, its JSON; a request
// refused gets its HTTP status and changes nothing.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fronts/mcp_http_policy.hpp"
#include "fronts/mcp_protocol.hpp"
#include "sys/poller.hpp"
#include "sys/timer_fd.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox::mcp {

struct HttpOptions {
    ListenAddress address;
    std::string token;                         // empty: none asked (loopback only)
    std::vector<std::string> allowed_origins;  // besides this host's loopback at the port
    std::size_t max_body = 0;                  // bytes of one POST's body
    std::size_t max_clients = 16;              // client sessions (Mcp-Session-Id) at once
    std::size_t max_client_requests = 8;       // one client's requests in flight at once
    std::size_t max_connections = 64;          // open connections at once
};

// One message for the server, from a client session.
struct Inbound {
    std::string client;  // its Mcp-Session-Id
    bool end = false;    // DELETE: the client's session ended
    nlohmann::json message;
    std::uint64_t exchange = 0;  // a request's (where its answer goes); 0: a notification
    // The client closed the connection `exchange` was answering on before its answer: nothing
    // will read it.
    bool gone = false;
};

class HttpTransport {
  public:
    // Binds and listens, and watches its descriptors in `poller`. UsageError when it cannot
    // bind, or when it would listen beyond loopback without a token.
    HttpTransport(HttpOptions options, sys::Poller& poller);
    ~HttpTransport();
    HttpTransport(const HttpTransport&) = delete;
    HttpTransport& operator=(const HttpTransport&) = delete;

    int port() const { return port_; }
    // The protocol version `client` negotiated: whether it may send batches.
    void set_protocol(const std::string& client, const Protocol& protocol);
    // The messages that came since the last call, in order.
    std::vector<Inbound> take();
    // A message for the request `exchange` is the answer to: its notifications, then its
    // response (`final`). Nothing when its connection is gone.
    void send(std::uint64_t exchange, const std::string& message, bool final);
    // No response will come (the call was cancelled, its client ended): the POST ends (202, or
    // its SSE stream ends).
    void close_exchange(std::uint64_t exchange);
    // Accepts and reads no more; the exchanges still open are closed.
    void stop();
    // Nothing is waiting to be written.
    bool flushed() const;
    // Writes now what each connection has to write, as far as its socket takes it, rather than
    // at the loop's next round.
    void write_now();

  private:
    struct Connection;
    void accept_all();
    void on_ready(Connection& connection, short revents);
    void read_from(Connection& connection);
    void parse(Connection& connection);
    void handle(Connection& connection);
    void handle_post(Connection& connection);
    // Refuses a batch the client may not send; its requests counted.
    bool check_batch(Connection& connection, const std::string& client, const nlohmann::json& batch,
                     std::size_t& requests);
    void handle_delete(Connection& connection);
    void respond(Connection& connection, int status, std::string body,
                 std::string_view content_type,
                 const std::vector<std::pair<std::string, std::string>>& headers);
    void refuse(Connection& connection, int status, int code, const std::string& message,
                const std::vector<std::pair<std::string, std::string>>& headers = {});
    void write_to(Connection& connection);
    void close(std::uint64_t id);
    void arm_clock();
    void on_clock();
    Connection* exchange_connection(std::uint64_t exchange);
    void end_exchange(std::uint64_t exchange);

    HttpOptions options_;
    sys::Poller& poller_;
    sys::UniqueFd listener_;
    int port_ = 0;
    sys::TimerFd clock_;  // the earliest connection deadline
    std::chrono::steady_clock::time_point armed_for_{};
    std::map<std::uint64_t, std::unique_ptr<Connection>> connections_;
    std::uint64_t connection_count_ = 0;
    std::vector<std::unique_ptr<Connection>> graveyard_;  // closed in this poll round
    struct Exchange {
        std::uint64_t connection;
        std::string client;
        std::size_t requests = 1;  // a batch's: its requests, each counted against the limit
    };
    std::map<std::uint64_t, Exchange> exchanges_;  // requests the server has not answered
    std::uint64_t exchange_count_ = 0;
    std::map<std::string, const Protocol*> clients_;  // none until its initialize is answered
    std::map<std::string, std::size_t> in_flight_;    // a client's exchanges open
    std::vector<Inbound> inbound_;
    bool stopping_ = false;
    bool accept_paused_ = false;  // out of descriptors: until a connection closes
};

}  // namespace pysandbox::mcp
