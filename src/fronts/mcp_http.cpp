#include "fronts/mcp_http.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <optional>
#include <string_view>
#include <utility>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>

#include "fronts/mcp_protocol.hpp"
#include "fronts/requests.hpp"
#include "report/encoding.hpp"
#include "report/json_text.hpp"
#include "sys/errors.hpp"

namespace pysandbox::mcp {
namespace {

namespace http = boost::beast::http;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kEndpoint = "/mcp";
constexpr std::string_view kSessionHeader = "Mcp-Session-Id";
constexpr std::string_view kVersionHeader = "MCP-Protocol-Version";
// A request's head is small; a browser's or a proxy's is a few KiB.
constexpr std::uint32_t kMaxHead = 16 * 1024;
// A request must come whole within this (head and body: 16 MiB at 0.5 MB/s), and a connection
// with nothing to do is closed after it; so is one whose reader takes nothing for it.
constexpr std::chrono::seconds kRequestTime{30};
// After a refusal that closes the connection, what the client still sends is read and dropped
// this long, so that it reads the answer rather than a reset.
constexpr std::chrono::seconds kLinger{2};

// JSON-RPC error codes of what the transport refuses itself.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kServerError = -32000;

// Appends what a serializer makes of `message`: its head only, when `head_only`.
template <bool isRequest, class Body, class Fields>
void serialize(http::message<isRequest, Body, Fields>& message, std::string& out,
               bool head_only = false) {
    http::serializer<isRequest, Body, Fields> serializer(message);
    serializer.split(head_only);
    boost::system::error_code error;
    while (!(head_only ? serializer.is_header_done() : serializer.is_done())) {
        serializer.next(error, [&](boost::system::error_code&, const auto& buffers) {
            out += boost::beast::buffers_to_string(buffers);
            serializer.consume(boost::asio::buffer_size(buffers));
        });
        if (error) throw SysError("serializing an HTTP response: " + error.message(), EINVAL);
    }
}

bool accepts(std::string_view accept, std::string_view type) {
    return accept.find(type) != std::string_view::npos ||
           accept.find("*/*") != std::string_view::npos;
}

// A request whose answer streams: one that asked for progress (MCP "Progress").
bool wants_progress(const json& message) {
    const auto params = message.find("params");
    if (params == message.end() || !params->is_object()) return false;
    const auto meta = params->find("_meta");
    return meta != params->end() && meta->is_object() && meta->contains("progressToken");
}

std::string sse_event(std::string_view message) {
    return "event: message\ndata: " + std::string(message) + "\n\n";
}

std::string_view header(const http::request<http::string_body>& request, std::string_view name) {
    const auto it = request.find(boost::beast::string_view(name.data(), name.size()));
    if (it == request.end()) return {};
    return {it->value().data(), it->value().size()};
}

bool has_header(const http::request<http::string_body>& request, std::string_view name) {
    return request.find(boost::beast::string_view(name.data(), name.size())) != request.end();
}

// A listening socket at `address` (checked by parse_listen_address: IPv4, IPv6 or localhost,
// looked up by no resolver: a static binary has none); `port` the one it got.
sys::UniqueFd listen_on(const ListenAddress& address, int& port) {
    const std::string host = address.host == "localhost" ? "127.0.0.1" : address.host;
    const std::string where = address.host + ":" + std::to_string(address.port);
    sockaddr_storage storage{};
    socklen_t length = 0;
    auto* four = reinterpret_cast<sockaddr_in*>(&storage);
    auto* six = reinterpret_cast<sockaddr_in6*>(&storage);
    if (::inet_pton(AF_INET, host.c_str(), &four->sin_addr) == 1) {
        four->sin_family = AF_INET;
        four->sin_port = htons(static_cast<std::uint16_t>(address.port));
        length = sizeof *four;
    } else if (::inet_pton(AF_INET6, host.c_str(), &six->sin6_addr) == 1) {
        six->sin6_family = AF_INET6;
        six->sin6_port = htons(static_cast<std::uint16_t>(address.port));
        length = sizeof *six;
    } else {
        throw UsageError("--http " + where + ": not an IP address");
    }
    sys::UniqueFd fd(check_sys(
        ::socket(storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), "socket"));
    const int one = 1;
    check_sys(::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one),
              "setsockopt(SO_REUSEADDR)");
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&storage), length) != 0 ||
        ::listen(fd.get(), 64) != 0)
        throw UsageError("pysandbox mcp --http cannot listen on " + where + ": " +
                         std::strerror(errno) +
                         " (in use, or not an address of this host): choose another");
    check_sys(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&storage), &length),
              "getsockname");
    port = ntohs(storage.ss_family == AF_INET6 ? six->sin6_port : four->sin_port);
    return fd;
}

}  // namespace

struct HttpTransport::Connection {
    enum class State {
        reading,   // a request, until it is whole
        waiting,   // for the server's answer to it (an SSE stream's events go out meanwhile)
        writing,   // the answer, then the next request
        lingering  // the answer written and the sending side shut: reading what comes, dropping it
    };
    std::uint64_t id = 0;
    sys::UniqueFd fd;
    State state = State::reading;
    std::string in;  // read, not parsed yet
    std::optional<http::request_parser<http::string_body>> parser;
    std::string out;  // to write
    std::size_t written = 0;
    bool keep_alive = true;  // after this answer, the next request
    Clock::time_point deadline;
    // The exchange it waits for, and how its answer goes.
    std::uint64_t exchange = 0;
    bool streaming = false;       // as SSE
    bool stream_started = false;  // the SSE head is out
    std::string new_session;      // an initialize's Mcp-Session-Id, for its answer's head

    void start_request(std::size_t max_body) {
        parser.emplace();
        parser->header_limit(kMaxHead);
        parser->body_limit(max_body);
        parser->eager(true);
        state = State::reading;
        deadline = Clock::now() + kRequestTime;
    }
};

HttpTransport::HttpTransport(HttpOptions options, sys::Poller& poller)
    : options_(std::move(options)), poller_(poller) {
    if (options_.token.empty() && !is_loopback(options_.address.host))
        throw UsageError("pysandbox mcp --http " + options_.address.host +
                         " would serve beyond loopback without a bearer token: give one with "
                         "--http-token-file FILE or $PYSANDBOX_MCP_TOKEN (and TLS through a "
                         "reverse proxy: see MCP OVER HTTP in pysandbox(1))");
    listener_ = listen_on(options_.address, port_);
    poller_.watch(
        [this] {
            return sys::Poller::Interest{stopping_ || accept_paused_ ? -1 : listener_.get(),
                                         POLLIN};
        },
        [this](short) { accept_all(); }, this);
    poller_.watch(
        [this] {
            arm_clock();
            return sys::Poller::Interest{clock_.get(), POLLIN};
        },
        [this](short) {
            clock_.acknowledge();
            armed_for_ = {};
            on_clock();
        },
        this);
}

HttpTransport::~HttpTransport() {
    poller_.forget(this);
    for (const auto& [id, connection] : connections_) poller_.forget(connection.get());
}

std::vector<Inbound> HttpTransport::take() {
    graveyard_.clear();
    return std::exchange(inbound_, {});
}

// ---------------------------------------------------------------------- connections

void HttpTransport::accept_all() {
    for (;;) {
        sys::UniqueFd fd(
            ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!fd) {
            // Out of descriptors: the listener stays readable, so it is not watched until a
            // connection closes. Otherwise EAGAIN, or a connection gone before it was taken.
            accept_paused_ = errno == EMFILE || errno == ENFILE;
            return;
        }
        if (connections_.size() >= options_.max_connections) continue;  // closed: no room
        auto connection = std::make_unique<Connection>();
        connection->id = ++connection_count_;
        connection->fd = std::move(fd);
        connection->start_request(options_.max_body);
        Connection* raw = connection.get();
        poller_.watch(
            [raw] {
                const bool read = raw->state == Connection::State::reading ||
                                  raw->state == Connection::State::lingering;
                const bool write = raw->written < raw->out.size();
                // While its answer is awaited, only the client's leaving is read (what it would
                // send behind the request waits in the kernel): then what it asked is abandoned.
                const bool leaving = raw->state == Connection::State::waiting;
                return sys::Poller::Interest{
                    raw->fd.get(), static_cast<short>((read ? POLLIN : 0) | (write ? POLLOUT : 0) |
                                                      (leaving ? POLLRDHUP : 0))};
            },
            [this, raw](short revents) { on_ready(*raw, revents); }, raw);
        connections_.emplace(raw->id, std::move(connection));
    }
}

void HttpTransport::on_ready(Connection& connection, short revents) {
    if ((revents & (POLLOUT | POLLERR)) != 0 && connection.written < connection.out.size())
        write_to(connection);
    if (!connection.fd) return;
    // The client shut its side while its answer was awaited (as an HTTP client does when it
    // gives up on a request: it closes the connection): gone, and with it what the answer was for.
    if (connection.state == Connection::State::waiting &&
        (revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
        close(connection.id);
        return;
    }
    if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0 &&
        (connection.state == Connection::State::reading ||
         connection.state == Connection::State::lingering))
        read_from(connection);
}

void HttpTransport::read_from(Connection& connection) {
    char chunk[65536];
    const ssize_t n = ::read(connection.fd.get(), chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {  // the client closed, or the connection broke
        close(connection.id);
        return;
    }
    if (connection.state == Connection::State::lingering) return;  // dropped
    connection.in.append(chunk, static_cast<std::size_t>(n));
    parse(connection);
}

void HttpTransport::parse(Connection& connection) {
    std::size_t offset = 0;
    boost::system::error_code error;
    while (connection.state == Connection::State::reading && offset < connection.in.size()) {
        offset += connection.parser->put(
            boost::asio::buffer(connection.in.data() + offset, connection.in.size() - offset),
            error);
        if (error == http::error::need_more) {
            error = {};
            break;
        }
        if (error) break;
        if (connection.parser->is_done()) {
            connection.in.erase(0, offset);
            offset = 0;
            handle(connection);
            return;
        }
    }
    connection.in.erase(0, offset);
    if (!error) return;
    connection.keep_alive = false;
    if (error == http::error::body_limit)
        refuse(connection, 413, kInvalidRequest,
               "the body is over " + std::to_string(options_.max_body) +
                   " bytes, the server's limit for one message");
    else if (error == http::error::header_limit)
        refuse(connection, 431, kInvalidRequest,
               "the request's head is over " + std::to_string(kMaxHead) + " bytes");
    else
        refuse(connection, 400, kInvalidRequest, "not an HTTP/1.1 request: " + error.message());
}

void HttpTransport::write_to(Connection& connection) {
    const ssize_t n = ::send(connection.fd.get(), connection.out.data() + connection.written,
                             connection.out.size() - connection.written, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n < 0) {
        close(connection.id);
        return;
    }
    connection.written += static_cast<std::size_t>(n);
    connection.deadline = Clock::now() + kRequestTime;
    if (connection.written < connection.out.size()) return;
    connection.out.clear();
    connection.written = 0;
    if (connection.state != Connection::State::writing) return;
    if (!connection.keep_alive || stopping_) {
        // The client may still be sending (a body too big to read): it reads the answer first.
        ::shutdown(connection.fd.get(), SHUT_WR);
        connection.state = Connection::State::lingering;
        connection.deadline = Clock::now() + kLinger;
        return;
    }
    connection.start_request(options_.max_body);
    parse(connection);  // a request that came behind this one
}

void HttpTransport::close(std::uint64_t id) {
    const auto it = connections_.find(id);
    if (it == connections_.end()) return;
    Connection& connection = *it->second;
    if (connection.exchange != 0) {
        // Unanswered: the server stops what it ran for it (when it is not stopping anyway).
        if (!stopping_)
            if (const auto exchange = exchanges_.find(connection.exchange);
                exchange != exchanges_.end())
                inbound_.push_back(
                    {exchange->second.client, false, nullptr, exchange->first, true});
        end_exchange(connection.exchange);
    }
    poller_.forget(&connection);
    accept_paused_ = false;
    // Gone once the poll round that may still hold it is over (take()).
    graveyard_.push_back(std::move(it->second));
    graveyard_.back()->fd.reset();
    connections_.erase(it);
}

void HttpTransport::arm_clock() {
    Clock::time_point earliest = Clock::time_point::max();
    for (const auto& [id, connection] : connections_)
        if (connection->state != Connection::State::waiting ||
            connection->written < connection->out.size())
            earliest = std::min(earliest, connection->deadline);
    if (earliest == armed_for_) return;
    armed_for_ = earliest;
    if (earliest == Clock::time_point::max())
        clock_.disarm();
    else
        clock_.arm(earliest - Clock::now());
}

void HttpTransport::on_clock() {
    const Clock::time_point now = Clock::now();
    std::vector<std::uint64_t> late;
    for (const auto& [id, connection] : connections_)
        if ((connection->state != Connection::State::waiting ||
             connection->written < connection->out.size()) &&
            connection->deadline <= now)
            late.push_back(id);
    for (const std::uint64_t id : late) close(id);
}

bool HttpTransport::flushed() const {
    return std::ranges::all_of(connections_, [](const auto& entry) {
        return entry.second->written == entry.second->out.size() &&
               entry.second->state != Connection::State::waiting;
    });
}

void HttpTransport::write_now() {
    std::vector<std::uint64_t> pending;  // write_to may close a connection
    for (const auto& [id, connection] : connections_)
        if (connection->written < connection->out.size()) pending.push_back(id);
    for (const std::uint64_t id : pending)
        if (const auto it = connections_.find(id); it != connections_.end()) write_to(*it->second);
}

// ---------------------------------------------------------------------- answers

void HttpTransport::respond(Connection& connection, int status, std::string body,
                            std::string_view content_type,
                            const std::vector<std::pair<std::string, std::string>>& headers) {
    http::response<http::string_body> response{static_cast<http::status>(status), 11};
    if (!content_type.empty())
        response.set(http::field::content_type,
                     boost::beast::string_view(content_type.data(), content_type.size()));
    for (const auto& [name, value] : headers) response.set(name, value);
    if (!connection.new_session.empty())
        response.set(std::string(kSessionHeader), std::exchange(connection.new_session, {}));
    response.keep_alive(connection.keep_alive && !stopping_);
    response.body() = std::move(body);
    response.prepare_payload();
    serialize(response, connection.out);
    connection.state = Connection::State::writing;
    connection.deadline = Clock::now() + kRequestTime;
}

void HttpTransport::refuse(Connection& connection, int status, int code, const std::string& message,
                           const std::vector<std::pair<std::string, std::string>>& headers) {
    respond(connection, status,
            dump_line(json{{"jsonrpc", "2.0"},
                           {"id", nullptr},
                           {"error", {{"code", code}, {"message", message}}}}),
            "application/json", headers);
}

void HttpTransport::send(std::uint64_t exchange, const std::string& message, bool final) {
    Connection* connection = exchange_connection(exchange);
    if (connection == nullptr) return;
    if (!connection->streaming) {
        // Without a stream only the response goes: the notifications before it have no place.
        if (!final) return;
        end_exchange(exchange);
        respond(*connection, 200, message, "application/json", {});
        return;
    }
    if (!connection->stream_started) {
        http::response<http::empty_body> head{http::status::ok, 11};
        head.set(http::field::content_type, "text/event-stream");
        head.set(http::field::cache_control, "no-cache");
        if (!connection->new_session.empty())
            head.set(std::string(kSessionHeader), std::exchange(connection->new_session, {}));
        head.keep_alive(connection->keep_alive && !stopping_);
        head.chunked(true);
        serialize(head, connection->out, true);
        connection->stream_started = true;
    }
    const std::string event = sse_event(message);
    connection->out += boost::beast::buffers_to_string(
        http::make_chunk(boost::asio::buffer(event.data(), event.size())));
    if (!final) return;
    end_exchange(exchange);
    connection->out += boost::beast::buffers_to_string(http::make_chunk_last());
    connection->state = Connection::State::writing;
    connection->deadline = Clock::now() + kRequestTime;
}

void HttpTransport::close_exchange(std::uint64_t exchange) {
    Connection* connection = exchange_connection(exchange);
    if (connection == nullptr) return;
    end_exchange(exchange);
    if (connection->stream_started) {
        connection->out += boost::beast::buffers_to_string(http::make_chunk_last());
        connection->state = Connection::State::writing;
        connection->deadline = Clock::now() + kRequestTime;
    } else {
        respond(*connection, 202, {}, {}, {});
    }
}

HttpTransport::Connection* HttpTransport::exchange_connection(std::uint64_t exchange) {
    const auto it = exchanges_.find(exchange);
    if (it == exchanges_.end()) return nullptr;
    const auto connection = connections_.find(it->second.connection);
    return connection != connections_.end() ? connection->second.get() : nullptr;
}

void HttpTransport::end_exchange(std::uint64_t exchange) {
    const auto it = exchanges_.find(exchange);
    if (it == exchanges_.end()) return;
    if (const auto count = in_flight_.find(it->second.client); count != in_flight_.end()) {
        count->second -= std::min(count->second, it->second.requests);
        if (count->second == 0) in_flight_.erase(count);
    }
    if (const auto connection = connections_.find(it->second.connection);
        connection != connections_.end())
        connection->second->exchange = 0;
    exchanges_.erase(it);
}

void HttpTransport::stop() {
    if (stopping_) return;
    stopping_ = true;
    listener_.reset();
    std::vector<std::uint64_t> open;
    for (const auto& [exchange, where] : exchanges_) open.push_back(exchange);
    for (const std::uint64_t exchange : open) close_exchange(exchange);
    std::vector<std::uint64_t> idle;
    for (const auto& [id, connection] : connections_)
        if (connection->state == Connection::State::reading) idle.push_back(id);
    for (const std::uint64_t id : idle) close(id);
}

// ---------------------------------------------------------------------- requests

// Origin and token before anything else: a refused request reaches no server, learns nothing and
// changes nothing.
void HttpTransport::handle(Connection& connection) {
    const auto& request = connection.parser->get();
    connection.keep_alive = request.keep_alive();
    const std::string_view target(request.target().data(), request.target().size());
    if (target.substr(0, target.find('?')) != kEndpoint)
        return refuse(connection, 404, kInvalidRequest, "not found: the MCP endpoint is /mcp");
    if (has_header(request, "Origin") &&
        !origin_allowed(header(request, "Origin"), port_, options_.allowed_origins))
        return refuse(connection, 403, kInvalidRequest,
                      "Origin " + std::string(header(request, "Origin")) +
                          " is not allowed (--http-allow-origin)");
    if (!options_.token.empty() &&
        !bearer_matches(header(request, "Authorization"), options_.token))
        return refuse(connection, 401, kInvalidRequest, "a valid bearer token is required",
                      {{"WWW-Authenticate", "Bearer"}});
    switch (request.method()) {
        case http::verb::post: return handle_post(connection);
        case http::verb::delete_: return handle_delete(connection);
        default:
            return refuse(connection, 405, kInvalidRequest,
                          "use POST (and DELETE to end a session): this server sends nothing "
                          "unasked, so it offers no GET stream",
                          {{"Allow", "POST, DELETE"}});
    }
}

void HttpTransport::handle_delete(Connection& connection) {
    const std::string client(header(connection.parser->get(), kSessionHeader));
    if (client.empty())
        return refuse(connection, 400, kInvalidRequest, "Mcp-Session-Id is missing");
    if (clients_.erase(client) == 0)
        return refuse(connection, 404, kInvalidRequest,
                      "no such session: it ended, or was never started");
    inbound_.push_back({client, true, nullptr, 0});
    respond(connection, 200, {}, {}, {});
}

void HttpTransport::handle_post(Connection& connection) {
    auto& request = connection.parser->get();
    const std::string_view accept = header(request, "Accept");
    if (!accepts(accept, "application/json") || !accepts(accept, "text/event-stream"))
        return refuse(connection, 406, kInvalidRequest,
                      "Accept must list application/json and text/event-stream");
    if (!header(request, "Content-Type").starts_with("application/json"))
        return refuse(connection, 415, kInvalidRequest, "Content-Type must be application/json");
    BoundedJson parsed = parse_bounded(request.body(), kRequestBounds);
    request.body().clear();
    request.body().shrink_to_fit();
    if (parsed.problem == BoundedJson::Problem::invalid)
        return refuse(connection, 400, kParseError, "the message " + parsed.message);
    if (!parsed.message.empty())
        return refuse(connection, 400, kInvalidRequest, "the message " + parsed.message);
    json message = std::move(parsed.value);
    const bool batch = message.is_array();
    if (!batch && !message.is_object())
        return refuse(connection, 400, kInvalidRequest,
                      "a message must be a JSON object (or a batch of them, an array)");
    const auto id = batch ? message.end() : message.find("id");
    const bool is_request = !batch && message.contains("method") && id != message.end();
    if (is_request && !id->is_string() && !id->is_number_integer())
        return refuse(connection, 400, kInvalidRequest,
                      "a request's id must be a string or an integer");
    std::string client(header(request, kSessionHeader));
    if (is_request && message.value("method", json()) == "initialize") {
        if (!client.empty())
            return refuse(connection, 400, kInvalidRequest,
                          "initialize starts a session: send it without Mcp-Session-Id");
        if (clients_.size() >= options_.max_clients)
            return refuse(connection, 503, kServerError,
                          "this server has " + std::to_string(options_.max_clients) +
                              " client sessions (--http-max-clients): one must end (DELETE) "
                              "first");
        client = encoding::random_hex(16);
        clients_.emplace(client, nullptr);
        connection.new_session = client;
    } else {
        if (client.empty())
            return refuse(connection, 400, kInvalidRequest,
                          "Mcp-Session-Id is missing (initialize gives one)");
        if (!clients_.contains(client))
            return refuse(connection, 404, kInvalidRequest,
                          "no such session: it ended, or was never started (initialize)");
        if (has_header(request, kVersionHeader) &&
            std::ranges::find(kProtocols, header(request, kVersionHeader), &Protocol::version) ==
                std::end(kProtocols))
            return refuse(
                connection, 400, kInvalidRequest,
                "unsupported MCP-Protocol-Version " + std::string(header(request, kVersionHeader)));
    }
    std::size_t requests = is_request ? 1 : 0;
    if (batch && !check_batch(connection, client, message, requests)) return;
    if (requests == 0) {  // notifications, or responses
        inbound_.push_back({client, false, std::move(message), 0});
        return respond(connection, 202, {}, {}, {});
    }
    std::size_t& in_flight = in_flight_[client];
    if (in_flight + requests > options_.max_client_requests) {
        if (in_flight == 0) in_flight_.erase(client);
        return refuse(connection, 429, kServerError,
                      "this client has " + std::to_string(options_.max_client_requests) +
                          " requests in flight at most (--http-max-client-requests): wait for "
                          "one");
    }
    in_flight += requests;
    const std::uint64_t exchange = ++exchange_count_;
    exchanges_[exchange] = {connection.id, client, requests};
    connection.exchange = exchange;
    connection.streaming =
        batch ? std::ranges::any_of(message, [](const json& one) { return wants_progress(one); })
              : wants_progress(message);
    connection.stream_started = false;
    connection.state = Connection::State::waiting;
    inbound_.push_back({client, false, std::move(message), exchange});
}

// A batch (JSON-RPC 2.0 "Batch"), judged whole before any of it reaches the server: only under a
// protocol version that has batches, not empty, at most --http-max-client-requests messages,
// each a request, a notification or a response, and initialize never among them (it comes alone:
// MCP "Lifecycle"). Anything else refuses it all, and changes nothing.
bool HttpTransport::check_batch(Connection& connection, const std::string& client,
                                const json& batch, std::size_t& requests) {
    const Protocol* protocol = clients_.at(client);
    if (protocol == nullptr || !protocol->batches) {
        refuse(connection, 400, kInvalidRequest,
               "JSON-RPC batches are not part of MCP " +
                   (protocol != nullptr ? std::string(protocol->version) : std::string("yet")) +
                   " (only of 2024-11-05 and 2025-03-26; 2025-06-18 removed them): send one "
                   "message a POST");
        return false;
    }
    if (batch.empty()) {
        refuse(connection, 400, kInvalidRequest,
               "an empty batch: a batch holds one message or more");
        return false;
    }
    if (batch.size() > options_.max_client_requests) {
        refuse(connection, 400, kInvalidRequest,
               "a batch of " + std::to_string(batch.size()) + " messages: at most " +
                   std::to_string(options_.max_client_requests) + " (--http-max-client-requests)");
        return false;
    }
    requests = 0;
    for (const json& message : batch) {
        const char* problem = nullptr;
        const auto id = message.is_object() ? message.find("id") : message.end();
        if (!message.is_object())
            problem = "each message of a batch must be a JSON object";
        else if (!message.contains("method") && !message.contains("result") &&
                 !message.contains("error"))
            problem = "a message of the batch is no request, notification or response";
        else if (!message.contains("method") || id == message.end())
            continue;  // a response, or a notification: nothing to answer
        else if (!id->is_string() && !id->is_number_integer())
            problem = "a request's id must be a string or an integer";
        else if (message["method"] == "initialize")
            problem = "initialize comes alone, never in a batch";
        if (problem != nullptr) {
            refuse(connection, 400, kInvalidRequest, problem);
            return false;
        }
        ++requests;
    }
    return true;
}

void HttpTransport::set_protocol(const std::string& client, const Protocol& protocol) {
    if (const auto it = clients_.find(client); it != clients_.end()) it->second = &protocol;
}

}  // namespace pysandbox::mcp
