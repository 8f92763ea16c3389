// The running proxy: one thread, one poll loop, non-blocking sockets. It accepts on the socket
// the sandbox handed out (the sandbox's network namespace) and connects upstream from the
// supervisor's own (the host's), only to what the allowlist names.

#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>
#include <utility>

#include "proxy/addresses.hpp"
#include "proxy/proxy.hpp"
#include "sys/bounded_counts.hpp"

namespace pysandbox::proxy {
namespace {

using Clock = std::chrono::steady_clock;
using sys::UniqueFd;

constexpr std::size_t kChunk = 64 * 1024;

struct Address {
    sockaddr_storage storage{};
    socklen_t length = 0;
};

// One eventfd: poll() sees it readable once signal() was called.
class Wakeup {
  public:
    Wakeup() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
        if (!fd_) throw SysError("eventfd", errno);
    }
    void signal() noexcept {
        std::uint64_t one = 1;
        [[maybe_unused]] auto n = ::write(fd_.get(), &one, sizeof one);
    }
    void clear() noexcept {
        std::uint64_t count;
        [[maybe_unused]] auto n = ::read(fd_.get(), &count, sizeof count);
    }
    int get() const noexcept { return fd_.get(); }

  private:
    UniqueFd fd_;
};

// A name lookup on a detached thread: getaddrinfo() can be neither polled nor cancelled, and a
// hung resolver must never hold up the end of a run. The thread shares only this state and the
// wakeup, both kept alive by shared_ptr however long it takes.
struct Lookup {
    std::mutex mutex;
    bool done = false;
    std::vector<Address> addresses;
    std::string error;
    std::string forbidden;  // the first address a name may not lead to, and why (addresses.hpp)
};

// Every address of every interface of the host, now: a name may lead to none of them.
std::vector<sockaddr_storage> host_own_addresses() {
    std::vector<sockaddr_storage> own;
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return own;
    for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
        const sockaddr* address = entry->ifa_addr;
        if (address == nullptr || (address->sa_family != AF_INET && address->sa_family != AF_INET6))
            continue;
        sockaddr_storage copy{};
        std::memcpy(&copy, address,
                    address->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
        own.push_back(copy);
    }
    ::freeifaddrs(list);
    return own;
}

// Whether the destination may lead to `address`: an IP literal in the allowlist anywhere (the
// operator's choice), localhost and names under it to loopback, any other name only where
// addresses.hpp allows. Records the first refusal in `lookup`.
bool may_reach(const Destination& destination, const sockaddr& address,
               const std::vector<sockaddr_storage>& own, Lookup& lookup) {
    if (destination.is_ip_literal) return true;
    if (destination.is_localhost() && is_loopback(address)) return true;
    const std::string_view reason = forbidden_reason(address, own);
    if (reason.empty()) return true;
    if (lookup.forbidden.empty())
        lookup.forbidden = address_text(address) + ", " + std::string(reason);
    return false;
}

// What getaddrinfo() found, less what a name may not lead to.
std::vector<Address> to_addresses(const addrinfo* list, const Destination& destination,
                                  Lookup& lookup) {
    std::vector<Address> out;
    const std::vector<sockaddr_storage> own = host_own_addresses();
    for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
        if (!may_reach(destination, *ai->ai_addr, own, lookup)) continue;
        Address address;
        std::memcpy(&address.storage, ai->ai_addr, ai->ai_addrlen);
        address.length = ai->ai_addrlen;
        out.push_back(address);
    }
    return out;
}

void resolve(const Destination& destination, Lookup& lookup) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    // No AI_ADDRCONFIG: it hides IPv4 answers on a host whose only IPv4 address is loopback.
    hints.ai_flags = destination.is_ip_literal ? AI_NUMERICHOST : 0;
    addrinfo* list = nullptr;
    const std::string port = std::to_string(destination.port);
    int rc = ::getaddrinfo(destination.host.c_str(), port.c_str(), &hints, &list);
    std::lock_guard lock(lookup.mutex);
    if (rc == 0) {
        lookup.addresses = to_addresses(list, destination, lookup);
        ::freeaddrinfo(list);
    }
    if (rc != 0)
        lookup.error = ::gai_strerror(rc);
    else if (lookup.addresses.empty() && lookup.forbidden.empty())
        lookup.error = "no internet address";
    lookup.done = true;
}

std::shared_ptr<Lookup> start_lookup(const Destination& destination,
                                     std::shared_ptr<Wakeup> wakeup) {
    auto lookup = std::make_shared<Lookup>();
    if (destination.is_ip_literal) {  // no resolver involved: answered at once
        resolve(destination, *lookup);
        wakeup->signal();
        return lookup;
    }
    std::thread([destination, lookup, wakeup] {
        resolve(destination, *lookup);
        wakeup->signal();
    }).detach();
    return lookup;
}

// Bytes on their way from one socket to the other; read again only once all were written, which
// keeps memory per connection bounded and makes a slow reader slow down the writer.
struct Relay {
    std::string data;
    std::size_t sent = 0;
    bool pending() const { return sent < data.size(); }
    void set(std::string bytes) {
        data = std::move(bytes);
        sent = 0;
    }
};

struct Connection {
    enum class Phase { reading_head, looking_up, connecting, relaying, answering, finished };
    Phase phase = Phase::reading_head;
    UniqueFd client;
    UniqueFd upstream;
    std::string head;  // what the client sent until the head was complete
    Relay to_client;
    Relay to_upstream;
    bool client_eof = false;
    bool upstream_eof = false;
    bool upstream_shut = false;
    ForwardPlan plan;
    std::string early_bytes;      // sent after the head, before the upstream was connected
    std::uint64_t body_left = 0;  // plain HTTP: request body bytes still to relay
    std::shared_ptr<Lookup> lookup;
    std::vector<Address> addresses;
    std::size_t next_address = 0;
    Clock::time_point deadline;
    std::uint64_t bytes = 0;
    int client_slot = -1;  // indexes into this round's pollfd array
    int upstream_slot = -1;
};

// Reads what is there into `into`; returns bytes read, 0 at EOF, -1 when nothing is ready or on
// error (errno says which).
ssize_t read_some(int fd, std::string& into, std::size_t limit) {
    into.resize(limit);
    ssize_t n;
    while ((n = ::recv(fd, into.data(), limit, 0)) < 0 && errno == EINTR) {
    }
    into.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return n;
}

// Writes what it can; false on a hard error.
bool write_some(int fd, Relay& relay) {
    ssize_t n;
    while ((n = ::send(fd, relay.data.data() + relay.sent, relay.data.size() - relay.sent,
                       MSG_NOSIGNAL)) < 0 &&
           errno == EINTR) {
    }
    if (n < 0) return errno == EAGAIN;
    relay.sent += static_cast<std::size_t>(n);
    return true;
}

}  // namespace

struct Proxy::Server {
    // The socket comes from the sandbox as it was made there: blocking. accept_clients() takes
    // connections until EAGAIN, so it must not be.
    Server(UniqueFd listener_fd, Allowlist list, Limits bounds)
        : listener(std::move(listener_fd)), allowlist(std::move(list)), limits(bounds) {
        if (::fcntl(listener.get(), F_SETFL, O_NONBLOCK) != 0)
            throw SysError("fcntl(proxy listener, O_NONBLOCK)", errno);
    }

    UniqueFd listener;
    Allowlist allowlist;
    Limits limits;
    Wakeup stop_request;
    std::shared_ptr<Wakeup> lookups_done = std::make_shared<Wakeup>();
    std::list<Connection> connections;
    std::mutex blocked_mutex;  // the proxy's thread counts; a session takes them per cell
    std::map<std::string, std::uint64_t> blocked;
    std::uint64_t total_bytes = 0;
    std::thread thread;

    void run() noexcept {
        try {
            while (poll_once()) {
            }
        } catch (...) {
            // Out of memory or descriptors: the proxy ends; the script sees its connections
            // refused, and the sandbox itself is unaffected.
        }
        connections.clear();
        listener.reset();
    }

    void count_blocked(const std::string& destination) {
        std::lock_guard lock(blocked_mutex);
        count_bounded(blocked, destination, std::string("(other destinations)"));
    }

    bool poll_once() {
        std::vector<pollfd> fds{{stop_request.get(), POLLIN, 0},
                                {lookups_done->get(), POLLIN, 0},
                                {listener.get(), POLLIN, 0}};
        for (Connection& c : connections) watch(c, fds);
        if (::poll(fds.data(), fds.size(), poll_timeout_ms()) < 0 && errno != EINTR)
            throw SysError("poll", errno);
        if (fds[0].revents) return false;
        if (fds[1].revents) on_lookups_done();
        if (fds[2].revents & POLLIN) accept_clients();
        for (Connection& c : connections) on_events(c, fds);
        expire_deadlines();
        std::erase_if(connections,
                      [](const Connection& c) { return c.phase == Connection::Phase::finished; });
        return true;
    }

    void watch(Connection& c, std::vector<pollfd>& fds) {
        using Phase = Connection::Phase;
        short client_events = 0, upstream_events = 0;
        switch (c.phase) {
            case Phase::reading_head: client_events = POLLIN; break;
            case Phase::connecting: upstream_events = POLLOUT; break;
            case Phase::answering: client_events = POLLOUT; break;
            case Phase::relaying:
                if (!c.client_eof && !c.to_upstream.pending()) client_events |= POLLIN;
                if (c.to_client.pending()) client_events |= POLLOUT;
                if (!c.upstream_eof && !c.to_client.pending()) upstream_events |= POLLIN;
                if (c.to_upstream.pending()) upstream_events |= POLLOUT;
                break;
            case Phase::looking_up:
            case Phase::finished: break;
        }
        c.client_slot = add(fds, c.client.get(), client_events);
        c.upstream_slot = add(fds, c.upstream.get(), upstream_events);
    }

    static int add(std::vector<pollfd>& fds, int fd, short events) {
        if (events == 0 || fd < 0) return -1;
        fds.push_back({fd, events, 0});
        return static_cast<int>(fds.size() - 1);
    }

    int poll_timeout_ms() const {
        if (connections.empty()) return -1;
        Clock::time_point first = Clock::time_point::max();
        for (const Connection& c : connections) first = std::min(first, c.deadline);
        auto wait = std::chrono::ceil<std::chrono::milliseconds>(first - Clock::now());
        return static_cast<int>(std::clamp<std::int64_t>(wait.count(), 0, 60'000));
    }

    void touch(Connection& c) { c.deadline = Clock::now() + limits.idle_timeout; }

    void accept_clients() {
        for (;;) {
            UniqueFd client(
                ::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
            if (!client) return;  // EAGAIN, or an error that the next round may not have
            Connection& c = connections.emplace_back();
            c.client = std::move(client);
            touch(c);
            if (connections.size() > limits.max_connections)
                answer(c, http_response(503, "Service Unavailable",
                                        "pysandbox: too many connections through the proxy at "
                                        "once\n"));
        }
    }

    void answer(Connection& c, std::string response) {
        c.upstream.reset();
        c.to_client.set(std::move(response));
        c.phase = Connection::Phase::answering;
        touch(c);
    }

    void finish(Connection& c) {
        c.phase = Connection::Phase::finished;
        c.client.reset();
        c.upstream.reset();
    }

    // Counts bytes against both caps; false (and the connection ended) once one is exceeded.
    bool within_byte_limits(Connection& c, std::size_t n) {
        c.bytes += n;
        total_bytes += n;
        if (c.bytes <= limits.max_bytes_per_connection && total_bytes <= limits.max_bytes_total)
            return true;
        finish(c);
        return false;
    }

    void on_events(Connection& c, const std::vector<pollfd>& fds) {
        const short client = c.client_slot >= 0 ? fds[c.client_slot].revents : 0;
        const short upstream = c.upstream_slot >= 0 ? fds[c.upstream_slot].revents : 0;
        c.client_slot = c.upstream_slot = -1;
        using Phase = Connection::Phase;
        if (client == 0 && upstream == 0) return;
        touch(c);
        switch (c.phase) {
            case Phase::reading_head: read_head(c); break;
            case Phase::connecting: on_connect_result(c); break;
            case Phase::answering:
                if (!write_some(c.client.get(), c.to_client) || !c.to_client.pending()) finish(c);
                break;
            case Phase::relaying: relay(c, client, upstream); break;
            case Phase::looking_up:
            case Phase::finished: break;
        }
    }

    void read_head(Connection& c) {
        std::string chunk;
        std::size_t room = limits.max_head_bytes + 1 - c.head.size();
        ssize_t n = read_some(c.client.get(), chunk, room);
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0 || !within_byte_limits(c, chunk.size())) return finish(c);
        c.head += chunk;
        std::size_t end = c.head.find("\r\n\r\n");
        if (end == std::string::npos) {
            if (c.head.size() > limits.max_head_bytes)
                answer(c, http_response(431, "Request Header Fields Too Large",
                                        "pysandbox: the request head is too large\n"));
            return;
        }
        c.early_bytes = c.head.substr(end + 4);
        c.head.resize(end + 4);
        on_head(c);
    }

    void on_head(Connection& c) {
        std::optional<RequestHead> request = parse_request_head(c.head);
        if (!request)
            return answer(c, http_response(400, "Bad Request", "pysandbox: malformed request\n"));
        auto decision = plan_forward(*request);
        if (auto* refusal = std::get_if<Refusal>(&decision))
            return answer(c,
                          http_response(refusal->status,
                                        refusal->status == 501 ? "Not Implemented" : "Bad Request",
                                        "pysandbox: " + refusal->reason + "\n"));
        c.plan = std::get<ForwardPlan>(std::move(decision));
        if (!allowlist.allows(c.plan.destination)) {
            count_blocked(c.plan.destination.to_string());
            return answer(c, denial_response(c.plan.destination, allowlist));
        }
        c.phase = Connection::Phase::looking_up;
        c.deadline = Clock::now() + limits.connect_timeout;
        c.lookup = start_lookup(c.plan.destination, lookups_done);
    }

    void on_lookups_done() {
        lookups_done->clear();
        for (Connection& c : connections) {
            if (c.phase != Connection::Phase::looking_up) continue;
            std::lock_guard lock(c.lookup->mutex);
            if (!c.lookup->done) continue;
            if (c.lookup->addresses.empty() && !c.lookup->forbidden.empty()) {
                refuse_forbidden(c);
                continue;
            }
            if (c.lookup->addresses.empty()) {
                answer(c, http_response(502, "Bad Gateway",
                                        "pysandbox: cannot resolve " + c.plan.destination.host +
                                            ": " + c.lookup->error + "\n"));
                continue;
            }
            c.addresses = std::move(c.lookup->addresses);
            connect_next(c);
        }
    }

    // The allowed name leads only where no name may: a violation, like a name not allowed.
    void refuse_forbidden(Connection& c) {
        const std::string destination = c.plan.destination.to_string();
        count_blocked(destination);
        answer(c, http_response(502, "Bad Gateway",
                                "pysandbox: the sandbox policy blocked the connection to " +
                                    destination + ": the name resolves to " + c.lookup->forbidden +
                                    ", which only an IP address written in network.allow may "
                                    "reach\n"));
    }

    // Tries the addresses in turn until a connect() is under way; 502 when none is left.
    void connect_next(Connection& c) {
        while (c.next_address < c.addresses.size()) {
            const Address& address = c.addresses[c.next_address++];
            UniqueFd fd(
                ::socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
            if (!fd) continue;
            int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage),
                               address.length);
            if (rc == 0 || errno == EINPROGRESS) {
                c.upstream = std::move(fd);
                c.phase = Connection::Phase::connecting;
                c.deadline = Clock::now() + limits.connect_timeout;
                return;
            }
        }
        answer(c, http_response(
                      502, "Bad Gateway",
                      "pysandbox: cannot connect to " + c.plan.destination.to_string() + "\n"));
    }

    void on_connect_result(Connection& c) {
        int error = 0;
        socklen_t length = sizeof error;
        if (::getsockopt(c.upstream.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error) {
            c.upstream.reset();
            return connect_next(c);
        }
        c.phase = Connection::Phase::relaying;
        if (c.plan.tunnel) {
            c.to_client.set("HTTP/1.1 200 Connection established\r\n\r\n");
            c.to_upstream.set(std::move(c.early_bytes));
        } else {
            c.body_left = c.plan.body_length;
            c.to_upstream.set(c.plan.upstream_head + take_body(c, std::move(c.early_bytes)));
        }
    }

    void relay(Connection& c, short client, short upstream) {
        if ((client & POLLOUT) && !write_some(c.client.get(), c.to_client)) return finish(c);
        if ((upstream & POLLOUT) && !write_some(c.upstream.get(), c.to_upstream)) return finish(c);
        if (client & (POLLIN | POLLHUP | POLLERR)) {
            if (!pump(c, c.client.get(), c.to_upstream, c.client_eof)) return;
            if (!c.plan.tunnel) c.to_upstream.set(take_body(c, std::move(c.to_upstream.data)));
        }
        if (upstream & (POLLIN | POLLHUP | POLLERR)) {
            if (!pump(c, c.upstream.get(), c.to_client, c.upstream_eof)) return;
        }
        if (c.plan.tunnel && c.client_eof && !c.to_upstream.pending() && !c.upstream_shut) {
            ::shutdown(c.upstream.get(), SHUT_WR);  // the client is done sending; so is the tunnel
            c.upstream_shut = true;
        }
        // The upstream's answer is complete once it has closed and all of it was passed on.
        if (c.upstream_eof && !c.to_client.pending()) finish(c);
    }

    // Plain HTTP: of what the client sent, the rest of the request's body and nothing after it (a
    // second, pipelined request is never relayed). Once the body is complete the client is not
    // read any more.
    static std::string take_body(Connection& c, std::string bytes) {
        if (bytes.size() > c.body_left) bytes.resize(c.body_left);
        c.body_left -= bytes.size();
        if (c.body_left == 0) c.client_eof = true;
        return bytes;
    }

    // Moves one chunk from `from` into `to`; false when the connection ended.
    bool pump(Connection& c, int from, Relay& to, bool& eof) {
        std::string chunk;
        ssize_t n = read_some(from, chunk, kChunk);
        if (n < 0 && errno == EAGAIN) return true;
        if (n < 0) {
            finish(c);
            return false;
        }
        if (n == 0) {
            eof = true;
            return true;
        }
        if (!within_byte_limits(c, chunk.size())) return false;
        to.set(std::move(chunk));
        return true;
    }

    void expire_deadlines() {
        const Clock::time_point now = Clock::now();
        for (Connection& c : connections) {
            if (c.phase == Connection::Phase::finished || c.deadline > now) continue;
            if (c.phase == Connection::Phase::looking_up ||
                c.phase == Connection::Phase::connecting)
                answer(c, http_response(504, "Gateway Timeout",
                                        "pysandbox: " + c.plan.destination.to_string() +
                                            " did not answer in time\n"));
            else
                finish(c);
        }
    }
};

Proxy::Proxy(UniqueFd listener, Allowlist allowlist, Limits limits)
    : server_(std::make_unique<Server>(std::move(listener), std::move(allowlist), limits)) {
    server_->thread = std::thread([server = server_.get()] { server->run(); });
}

Proxy::~Proxy() {
    stop();
}

std::map<std::string, std::uint64_t> Proxy::stop() {
    if (server_->thread.joinable()) {
        server_->stop_request.signal();
        server_->thread.join();
    }
    return take_blocked();
}

std::map<std::string, std::uint64_t> Proxy::take_blocked() {
    std::lock_guard lock(server_->blocked_mutex);
    return std::exchange(server_->blocked, {});
}

}  // namespace pysandbox::proxy
