#include "fronts/mcp.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "embed/result_schema.hpp"
#include "embed/version.hpp"
#include "engine/pool.hpp"
#include "engine/session.hpp"
#include "fronts/env.hpp"
#include "fronts/env_requests.hpp"
#include "fronts/front_loop.hpp"
#include "fronts/mcp_http.hpp"
#include "fronts/mcp_protocol.hpp"
#include "fronts/mcp_tools.hpp"
#include "fronts/output_events.hpp"
#include "fronts/requests.hpp"
#include "fronts/scratch_dir.hpp"
#include "plan/host_files.hpp"
#include "plan/plan.hpp"
#include "plan/profile.hpp"
#include "plan/units.hpp"
#include "report/encoding.hpp"
#include "report/exit_codes.hpp"
#include "report/json_text.hpp"
#include "sys/errors.hpp"
#include "sys/private_pages.hpp"
#include "sys/timer_fd.hpp"

namespace pysandbox {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// A message may carry files for /tmp/work, as a session's request line may: what it holds is
// read whole, parsed and copied into a sandbox, so it is bounded as that line is.
constexpr std::size_t kMaxMessage = kMaxRequestLine;

// JSON-RPC 2.0 error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;

// A JSON-RPC error; the message comes back as the request's error.
struct RpcError {
    int code;
    std::string message;
};

using Clock = std::chrono::steady_clock;

// A call's output as notifications/progress, when the call carried _meta.progressToken (MCP
// "Progress"): while the code runs, at most one every kProgressEvery with the text since the
// last. None goes with the result: what is left is in it, and the SDK handles a notification
// after the response read with it, when it no longer knows the token. Bounded: at most the output
// limit (and what a result shows, mcp::kOutputShown) of text in all, a note where it stops.
struct Progress {
    json token;
    OutputEvents output;     // the cell's observer adds to it (Cell::on_output)
    std::string text;        // not sent yet
    std::uint64_t sent = 0;  // bytes of text sent: each notification's `progress`
    std::uint64_t room = 0;  // bytes of text that may still be sent, the note apart
    bool full = false;
    Clock::time_point last{};  // when the last one went
};
constexpr std::chrono::milliseconds kProgressEvery{50};
// How long a pool's replacement may wait for the call in flight to be answered; and after an
// answer, how long the client has the cores to itself to read it (advance_pools).
constexpr std::chrono::milliseconds kRefillWait{100};
constexpr std::chrono::milliseconds kClientTurn{10};
constexpr std::string_view kProgressFull =
    "\n[... the rest of the output is in the result only ...]\n";

// A tools/call of run_python, from its arrival to its answer.
struct Call {
    json id;             // the JSON-RPC request's (over HTTP, the server's own number for it)
    std::string client;  // whose: over HTTP its Mcp-Session-Id; on stdio empty
    Offer* offer = nullptr;
    // With requirements: their environment (the call waits while it installs), then its offer,
    // which `offer` points to once the call runs.
    std::shared_ptr<const AskedEnvironment> asked;
    std::shared_ptr<Offer> environment;
    std::string session_id;  // empty: a one-shot sandbox
    Cell cell;
    std::unique_ptr<Progress> progress;  // with a progressToken; the cell's observer points in
};

// A one-shot call's own sandbox, for its one cell.
struct OneShot {
    Call call;
    std::unique_ptr<Session> session;
};

struct NamedSession {
    Offer* offer = nullptr;
    std::shared_ptr<Offer> environment;  // the offer, when it is that of start_session's packages
    std::string client;  // the only one that may use it (over HTTP: its Mcp-Session-Id)
    std::unique_ptr<Session> session;
    std::optional<Call> running;  // its cell, or cancelled: its result is not answered
    bool cancelled = false;
    Clock::time_point started;
    Clock::time_point last_call;  // or started: where limits.idle_timeout counts from
    // Why the session ends, once it does (end_session, its lifetime): it takes no more calls,
    // and goes once its running cell, killed, is answered.
    std::string ending;
};

// A start_session with requirements, answered once they are installed (or failed to be).
struct Starting {
    json id;
    std::string client;
    std::shared_ptr<const AskedEnvironment> asked;
};

// A sandbox that served a call, killed once the client has read the answer (advance_pools).
struct Served {
    Pool* pool;
    std::unique_ptr<Session> session;
    std::shared_ptr<Offer> environment;  // keeps the pool of an environment's offer
};

// Why sessions ended, for the calls that still name them: the last kRememberedEnds.
constexpr std::size_t kRememberedEnds = 256;

// A file a call made that is too big to embed in its result is offered as a resource of the
// server's own (pysandbox://files/...), which resources/read reads to the client session whose
// call made it, and to no other: at most kResourceCap big, for kResourceLifetime, the newest
// kMaxResources of the server (the oldest go first). It is read from the host copy the call left.
constexpr std::size_t kMaxResources = 256;
constexpr std::uint64_t kResourceCap = 4 * 1024 * 1024;
constexpr std::chrono::hours kResourceLifetime{1};
// MCP "Resources": the error of a read whose resource is not there.
constexpr int kResourceNotFound = -32002;

struct FileResource {
    std::string client;
    std::string host_path;
    std::string name;  // its path under /tmp/work
    std::string mime_type;
    std::uint64_t size = 0;
    std::chrono::steady_clock::time_point made;
};

// Why a server cannot run code (its profiles could not be planned, or their packages installed),
// and the exit code it ends with; an empty message: it can.
struct Unavailable {
    std::string message;
    int exit_code = exit_codes::kSandboxError;
};

class Server {
  public:
    // `unavailable`: why the profiles could not be planned (then `offers` is empty); the server
    // still answers initialize and tools/list, and every tools/call with it.
    // `http`: the options of the HTTP transport the messages come from instead of stdin.
    Server(std::vector<Offer> offers, const McpInvocation& invocation, Unavailable unavailable,
           const std::optional<mcp::HttpOptions>& http, const std::vector<std::string>& host_env)
        : loop_(!offers.empty() && offers.front().plan->ids.privileged, STDIN_FILENO, kMaxMessage),
          offers_(std::move(offers)),
          environments_(
              offers_,
              {invocation.overrides, invocation.verbose, host_env, invocation.pool, false, "mcp"},
              loop_.poller()),
          max_sessions_(invocation.max_sessions),
          max_calls_(invocation.max_calls),
          verbose_(invocation.verbose),
          schema_(ordered_json::parse(kResultSchemaText)),
          max_client_sessions_(http ? invocation.max_client_sessions : invocation.max_sessions),
          max_batch_(invocation.http_max_client_requests),
          unavailable_(std::move(unavailable)) {
        for (const Offer& offer : offers_) offered_.push_back(offer.name);
        if (!unavailable_.message.empty())
            for (const std::string& name : invocation.profiles)
                if (std::ranges::find(offered_, name) == offered_.end()) offered_.push_back(name);
        loop_.watch_signals([this](int sig) { on_signal(sig); });
        if (http)
            http_ = std::make_unique<mcp::HttpTransport>(*http, loop_.poller());
        else
            loop_.watch_lines([] { return true; });
        loop_.poller().watch(
            [this] {
                return sys::Poller::Interest{session_clock_.get(), POLLIN};
            },
            [this](short) {
                session_clock_.acknowledge();
                armed_for_.reset();
                end_expired_sessions();
            },
            this);
        loop_.poller().watch(
            [this] {
                return sys::Poller::Interest{progress_clock_.get(), POLLIN};
            },
            [this](short) {
                progress_clock_.acknowledge();
                progress_armed_.reset();
            },
            this);
        loop_.poller().watch(
            [this] {
                return sys::Poller::Interest{refill_clock_.get(), POLLIN};
            },
            [this](short) { refill_clock_.acknowledge(); }, this);
    }

    void start_pools(std::size_t size) {
        for (Offer& offer : offers_)
            offer.pool = std::make_unique<Pool>(*offer.plan, loop_.poller(), size);
    }

    int run() {
        for (;;) {
            loop_.poller().poll_once();
            environments_.advance();
            // The answers first, written at once: the rest of the round (the sandboxes that
            // served killed, new ones cloned and starting) would hold them back.
            const bool one_shot = answer_one_shots();
            const bool answered = answer_sessions() || one_shot;
            write_answers();
            advance_pools(answered);
            report_progress();
            if (http_)
                for (mcp::Inbound& inbound : http_->take())
                    if (!loop_.stopping()) on_inbound(std::move(inbound));
            while (!http_ && !loop_.stopping()) {
                auto line = loop_.input().next();
                if (!line) break;
                on_line(*line);
            }
            start_sessions();
            start_calls();
            arm_session_clock();
            if (loop_.output().broken()) stop(served_code());
            // Stdin closed: the calls already made are answered, then the server ends.
            if (!http_ && loop_.input().exhausted() && waiting_.empty() && starting_.empty() &&
                running() == 0)
                stop(served_code());
            if (loop_.stopping() && loop_.output().flushed() && (!http_ || http_->flushed()))
                return loop_.exit_code();
        }
    }

  private:
    // How a server that served to the end exits: 0, or as `pysandbox mcp` exits on a bad profile.
    int served_code() const { return unavailable_.message.empty() ? 0 : unavailable_.exit_code; }

    void say(const std::string& line) const {
        if (verbose_ > 0) pysandbox::say(line, "pysandbox mcp");
    }

  public:
    int port() const { return http_ ? http_->port() : 0; }

  private:
    // A message about the request `id` is the server's number for (its response: `final`), or
    // about the message being read (an error about it), under the id the client gave. A response
    // to a request of a batch waits for the others, and goes with them (settle).
    void send(ordered_json message, const json& id, bool final) {
        std::uint64_t exchange = reading_;
        std::uint64_t batch = reading_batch_;
        const auto route =
            id.is_number_integer() ? routes_.find(id.get<std::int64_t>()) : routes_.end();
        const bool routed = route != routes_.end();
        if (routed) {
            exchange = route->second.exchange;
            batch = route->second.batch;
            if (message.contains("id")) message["id"] = json::parse(route->second.id);
            if (final) routes_.erase(route);
        }
        if (batch == 0 || !final) {
            deliver(exchange, message, final);
            return;
        }
        const auto held = batches_.find(batch);
        if (held == batches_.end()) return;  // its client left
        held->second.responses.push_back(std::move(message));
        if (routed) {
            --held->second.requests;
            settle(batch);
        }
    }

    // On stdio a line. Over HTTP, to `exchange` (0: a notification's, which no one waits for).
    void deliver(std::uint64_t exchange, const ordered_json& message, bool final) {
        if (!http_)
            loop_.send(message);
        else if (exchange != 0)
            http_->send(exchange, dump_line(message), final);
    }

    void respond(const json& id, ordered_json result) {
        send({{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}, id, true);
    }

    void respond_error(const json& id, const RpcError& error) {
        send({{"jsonrpc", "2.0"},
              {"id", id},
              {"error", {{"code", error.code}, {"message", error.message}}}},
             id, true);
    }

    const mcp::Protocol& protocol_of(const std::string& client) const {
        const auto it = clients_.find(client);
        return it != clients_.end() ? *it->second : mcp::kLatestProtocol;
    }
    const mcp::Protocol& protocol() const { return protocol_of(client_); }

    // ------------------------------------------------------------------ HTTP

    // A message from an HTTP client, checked by the transport; or the end of its session, or
    // its leaving before an answer.
    void on_inbound(mcp::Inbound inbound) {
        client_ = inbound.client;
        if (inbound.end)
            end_client(inbound.client);
        else if (inbound.gone)
            abandon(inbound.exchange);
        else
            receive(std::move(inbound.message), inbound.exchange);
        client_.clear();
    }

    // An HTTP client closed the connection that its answer was to go on: each request of it
    // still open is cancelled, as notifications/cancelled would (a one-shot's sandbox dies now).
    void abandon(std::uint64_t exchange) {
        std::vector<std::int64_t> open;
        for (const auto& [number, route] : routes_)
            if (route.exchange == exchange) open.push_back(number);
        for (const std::int64_t number : open) {
            cancel(number);
            routes_.erase(number);
        }
        std::erase_if(batches_,
                      [&](const auto& entry) { return entry.second.exchange == exchange; });
        if (!open.empty()) say("an HTTP client left before its answer: what it asked is cancelled");
    }

    // A message or a batch of them from client_: on stdio a line (exchange 0), over HTTP a
    // POST's (`exchange`: where its answer goes; 0: nothing to answer).
    void receive(json message, std::uint64_t exchange) {
        if (!message.is_array()) {
            take(message, exchange, 0);
            return;
        }
        // JSON-RPC 2.0 "Batch". The HTTP transport judged these already; stdio's come here.
        if (const std::string refusal = batch_refusal(message); !refusal.empty()) {
            reading_ = exchange;
            respond_error(nullptr, {kInvalidRequest, refusal});
            reading_ = 0;
            return;
        }
        const std::uint64_t batch = ++batch_count_;
        batches_.emplace(batch, Batch{exchange, client_, 0, false, ordered_json::array()});
        for (json& one : message) take(one, exchange, batch);
        batches_.at(batch).read = true;
        settle(batch);
    }

    // Why a batch is refused whole, before any of it is served; empty: it is not.
    std::string batch_refusal(const json& batch) const {
        if (!protocol().batches)
            return "JSON-RPC batches are not part of MCP " + std::string(protocol().version) +
                   " (only of 2024-11-05 and 2025-03-26; 2025-06-18 removed them): send one "
                   "message a line";
        if (batch.empty()) return "an empty batch: a batch holds one message or more";
        if (batch.size() > max_batch_)
            return "a batch of " + std::to_string(batch.size()) + " messages: at most " +
                   std::to_string(max_batch_) + " (--http-max-client-requests)";
        return {};
    }

    // The batch's array goes once each of its requests is answered or cancelled: nothing when
    // none was answered (JSON-RPC: no empty array; over HTTP its POST ends with 202).
    void settle(std::uint64_t batch) {
        const auto it = batches_.find(batch);
        if (it == batches_.end() || !it->second.read || it->second.requests > 0) return;
        const Batch done = std::move(it->second);
        batches_.erase(it);
        if (!done.responses.empty())
            deliver(done.exchange, done.responses, true);
        else if (http_ && done.exchange != 0)
            http_->close_exchange(done.exchange);
    }

    // One message (of a batch: `batch`). A request's id becomes the server's own number (HTTP's
    // clients number their requests alike, and a batch's answers wait under it), which its
    // answers go back under; a cancellation names that number.
    void take(json& message, std::uint64_t exchange, std::uint64_t batch) {
        const auto id = message.is_object() ? message.find("id") : message.end();
        const bool response =
            message.is_object() && !message.contains("method") &&
            (message.contains("result") || message.contains("error"));  // never answered
        if (id != message.end() && (id->is_string() || id->is_number_integer()) && !response) {
            const std::string given = id->dump();
            const bool reused = std::ranges::any_of(routes_, [&](const auto& entry) {
                return entry.second.client == client_ && entry.second.id == given;
            });
            const std::int64_t number = ++routed_;
            routes_[number] = {exchange, given, client_, batch};
            if (batch != 0) ++batches_.at(batch).requests;
            *id = number;
            if (reused) {
                // A cancellation could not tell them apart.
                reading_batch_ = batch;
                respond_error(number, {kInvalidRequest, "a request with this id is in flight"});
                reading_batch_ = 0;
                return;
            }
        }
        std::optional<std::int64_t> cancelled;
        if (message.is_object() && message.value("method", json()) == "notifications/cancelled" &&
            message.contains("params") && message["params"].is_object()) {
            json& params = message["params"];
            for (const auto& [number, route] : routes_)
                if (route.client == client_ &&
                    route.id == params.value("requestId", json()).dump()) {
                    cancelled = number;
                    params["requestId"] = number;
                }
            if (!cancelled) params.erase("requestId");  // not this client's: nothing to cancel
        }
        reading_ = exchange;
        reading_batch_ = batch;
        on_message(message);
        reading_ = 0;
        reading_batch_ = 0;
        // A cancelled call is not answered: over HTTP its POST ends without a response.
        if (cancelled) drop_route(*cancelled);
    }

    // A request that gets no answer.
    void drop_route(std::int64_t number) {
        const auto it = routes_.find(number);
        if (it == routes_.end()) return;
        const Route route = it->second;
        routes_.erase(it);
        if (route.batch == 0) {
            if (http_ && route.exchange != 0) http_->close_exchange(route.exchange);
        } else if (const auto held = batches_.find(route.batch); held != batches_.end()) {
            --held->second.requests;
            settle(route.batch);
        }
    }

    // The id the client gave the request the server numbered `id`, for what the client reads.
    json client_id(const json& id) const {
        if (!id.is_number_integer()) return id;
        const auto route = routes_.find(id.get<std::int64_t>());
        return route != routes_.end() ? json::parse(route->second.id) : id;
    }

    // DELETE: a client session ends, with its MCP sessions and calls.
    void end_client(const std::string& client) {
        std::vector<std::string> owned;
        for (const auto& [session_id, named] : sessions_)
            if (named.client == client && named.ending.empty()) owned.push_back(session_id);
        for (const std::string& session_id : owned)
            end_named_session(session_id, "its client's HTTP session ended (DELETE)");
        std::erase_if(waiting_, [&](const Call& call) { return call.client == client; });
        std::erase_if(starting_, [&](const Starting& start) { return start.client == client; });
        for (auto it = one_shots_.begin(); it != one_shots_.end();)
            if (it->call.client == client) {
                it->call.offer->pool->retire(std::move(it->session));
                it = one_shots_.erase(it);
            } else {
                ++it;
            }
        std::erase_if(routes_, [&](const auto& entry) {
            if (entry.second.client != client) return false;
            http_->close_exchange(entry.second.exchange);
            return true;
        });
        std::erase_if(batches_, [&](const auto& entry) { return entry.second.client == client; });
        std::erase_if(ended_, [&](const EndedSession& ended) { return ended.client == client; });
        std::erase_if(resources_, [&](const auto& entry) { return entry.second.client == client; });
        clients_.erase(client);
        say("client session " + client + " ended");
    }

    // ------------------------------------------------------------------ messages in

    void on_line(const LineReader::Line& line) {
        if (line.too_long) {
            respond_error(nullptr, {kInvalidRequest, "the message is over " +
                                                         units::format_size(kMaxMessage) +
                                                         ", the server's limit for one line"});
            return;
        }
        if (is_blank(line.text)) return;
        // Its id cannot be read before it is parsed: an error here answers id null.
        BoundedJson parsed = parse_bounded(line.text, kRequestBounds);
        if (parsed.problem == BoundedJson::Problem::invalid) {
            respond_error(nullptr, {kParseError, "the message " + parsed.message});
            return;
        }
        if (!parsed.message.empty()) {
            respond_error(nullptr, {kInvalidRequest, "the message " + parsed.message});
            return;
        }
        receive(std::move(parsed.value), 0);
    }

    void on_message(const json& message) {
        if (!message.is_object()) {
            respond_error(nullptr, {kInvalidRequest, "a message must be a JSON object"});
            return;
        }
        const auto id_it = message.find("id");
        const bool has_id = id_it != message.end();
        const json id =
            has_id && (id_it->is_string() || id_it->is_number_integer()) ? *id_it : json(nullptr);
        const auto method = message.find("method");
        if (message.value("jsonrpc", json()) != "2.0" || method == message.end() ||
            !method->is_string() || (has_id && id.is_null())) {
            // A response from the client (we send no requests) is not answered.
            if (method == message.end() &&
                (message.contains("result") || message.contains("error")))
                return;
            respond_error(id, {kInvalidRequest, "not a JSON-RPC 2.0 request"});
            return;
        }
        // By reference, as the arguments below: a message may be 16 MiB of code and files, and
        // each copy of it would be as large again in this process.
        static const json kNoParams = json::object();
        const auto params_it = message.find("params");
        const json& params = params_it != message.end() ? *params_it : kNoParams;
        if (!has_id) {
            on_notification(method->get<std::string>(), params);
            return;
        }
        try {
            on_request(id, method->get<std::string>(), params);
        } catch (const RpcError& error) {
            respond_error(id, error);
        }
    }

    void on_notification(const std::string& method, const json& params) {
        if (method == "notifications/cancelled" && params.is_object()) {
            const auto request = params.find("requestId");
            if (request != params.end()) cancel(*request);
        }
        // notifications/initialized and any other: nothing to do, and never an answer.
    }

    void on_request(const json& id, const std::string& method, const json& params) {
        if (!params.is_object()) throw RpcError{kInvalidParams, "params must be an object"};
        if (method == "initialize") {
            initialize(id, params);
        } else if (method == "ping") {
            respond(id, ordered_json::object());
        } else if (method == "tools/list") {
            respond(id, {{"tools", mcp::tool_list(offered_, schema_, protocol())}});
        } else if (method == "resources/list") {
            respond(id, {{"resources", resource_list()}});
        } else if (method == "resources/read") {
            read_resource(id, params);
        } else if (method == "tools/call") {
            call_tool(id, params);
        } else {
            throw RpcError{kMethodNotFound, "no method \"" + method + "\""};
        }
    }

    void initialize(const json& id, const json& params) {
        // MCP "Lifecycle": nothing else may come before its answer.
        if (reading_batch_ != 0)
            throw RpcError{kInvalidRequest, "initialize comes alone, never in a batch"};
        const auto asked = params.find("protocolVersion");
        const mcp::Protocol& protocol = mcp::negotiate(asked != params.end() && asked->is_string()
                                                           ? asked->get_ref<const std::string&>()
                                                           : std::string_view());
        clients_[client_] = &protocol;
        if (http_) http_->set_protocol(client_, protocol);
        ordered_json server = {{"name", "pysandbox"}};
        if (protocol.titles) server["title"] = "pysandbox";
        server["version"] = kVersion;
        respond(id,
                {{"protocolVersion", protocol.version},
                 {"capabilities",
                  {{"tools", {{"listChanged", false}}}, {"resources", {{"listChanged", false}}}}},
                 {"serverInfo", std::move(server)},
                 {"instructions",
                  "run_python runs Python 3 in an isolated sandbox (no network, no host files, "
                  "limits on time, memory and output) and returns its output, the value of a "
                  "final expression, figures as images and the files it wrote. For state "
                  "across calls, start_session and pass its session_id. For packages the code "
                  "imports that are missing, give either tool requirements (pip specifiers)."}});
    }

    // Arguments a tool cannot run with. Up to 2025-06-18 they are among the protocol errors;
    // 2025-11-25 answers them as a tool's error, which the model reads and can correct (SEP-1303).
    void refuse(const json& id, const std::string& message) {
        if (protocol().argument_errors_as_results)
            respond(id, mcp::tool_error(message));
        else
            respond_error(id, {kInvalidParams, message});
    }

    void call_tool(const json& id, const json& params) {
        if (!unavailable_.message.empty()) {
            respond(id, mcp::tool_error(unavailable_.message));
            return;
        }
        const auto name = params.find("name");
        if (name == params.end() || !name->is_string())
            throw RpcError{kInvalidParams, "tools/call needs a \"name\""};
        static const json kNoArguments = json::object();
        const auto arguments_it = params.find("arguments");
        const json& arguments = arguments_it != params.end() ? *arguments_it : kNoArguments;
        if (!arguments.is_object())
            throw RpcError{kInvalidParams, "tools/call's \"arguments\" must be an object"};
        const std::string tool = name->get<std::string>();
        if (tool != "run_python" && tool != "start_session" && tool != "end_session")
            throw RpcError{
                kInvalidParams,
                "no tool \"" + tool + "\" (tools: run_python, start_session, end_session)"};
        try {
            if (tool == "run_python")
                run_python(id, arguments, params);
            else if (tool == "start_session")
                start_session(id, arguments);
            else
                end_session(id, arguments);
        } catch (const std::invalid_argument& e) {
            refuse(id, e.what());
        }
    }

    Offer& offer_named(const std::optional<std::string>& name) {
        if (!name) return offers_.front();
        return *std::ranges::find(offers_, *name, &Offer::name);
    }

    std::size_t index_of(const Offer& offer) const {
        return static_cast<std::size_t>(&offer - offers_.data());
    }

    // A call or a session whose packages could not be installed: a tool error the model reads,
    // with the install_error result where the protocol has structured results.
    ordered_json install_failure(const AskedEnvironment& asked, const json& id) const {
        ordered_json failure = asked.failure;
        failure["id"] = client_id(id);
        const ordered_json& install = failure["install"];
        std::string text = "install_error: " + failure.value("message", std::string());
        if (install.is_object() && !install.value("output_tail", std::string()).empty())
            text += "\n" + install["output_tail"].get<std::string>();
        ordered_json answer = mcp::tool_error(text);
        if (protocol().structured_content) answer["structuredContent"] = std::move(failure);
        return answer;
    }

    NamedSession& session_named(const std::string& session_id) {
        // Another client's session is as unknown to this one as a session never started.
        auto it = sessions_.find(session_id);
        if (it != sessions_.end() && it->second.client != client_) it = sessions_.end();
        if (it != sessions_.end() && it->second.ending.empty()) return it->second;
        if (it != sessions_.end())
            throw std::invalid_argument("session \"" + session_id +
                                        "\" ended: " + it->second.ending);
        const auto ended = std::ranges::find_if(ended_, [&](const EndedSession& e) {
            return e.id == session_id && e.client == client_;
        });
        if (ended != ended_.end())
            throw std::invalid_argument("session \"" + session_id + "\" ended: " + ended->why);
        throw std::invalid_argument("no session \"" + session_id +
                                    "\" (it ended, or was never started: start_session)");
    }

    void run_python(const json& id, const json& arguments, const json& params) {
        const mcp::RunArguments run = mcp::parse_run_arguments(arguments, offered_);
        Call call;
        call.id = id;
        call.client = client_;
        if (run.session_id) {
            call.offer = session_named(*run.session_id).offer;
            call.session_id = *run.session_id;
        } else {
            call.offer = &offer_named(run.profile);
        }
        // The profile's limits: an environment's offer is of the same profile.
        call.cell = parse_cell_fields(arguments, call.offer->plan->profile.limits);
        call.cell.id = client_id(id);
        call.progress = progress_for(params, call.offer->plan->profile.limits);
        if (call.progress) call.cell.on_output = call.progress->output.observer();
        // Last: a call refused for any other reason installs nothing.
        if (!run.requirements.empty())
            call.asked = environments_.ask(index_of(*call.offer), run.requirements);
        if (!call.session_id.empty()) sessions_.at(call.session_id).last_call = Clock::now();
        waiting_.push_back(std::move(call));
    }

    // The progress of a call that asked for it with _meta.progressToken (a string or an
    // integer), else none; none under 2024-11-05 either, whose notifications carry no message.
    std::unique_ptr<Progress> progress_for(const json& params, const Limits& limits) const {
        const auto meta = params.find("_meta");
        if (meta == params.end() || !meta->is_object()) return nullptr;
        const auto token = meta->find("progressToken");
        if (token == meta->end()) return nullptr;
        if (!token->is_string() && !token->is_number_integer())
            throw RpcError{kInvalidParams, "_meta.progressToken must be a string or an integer"};
        if (!protocol().progress_messages) return nullptr;
        auto progress = std::make_unique<Progress>();
        progress->token = *token;
        progress->room = std::min<std::uint64_t>(limits.output_limit, mcp::kOutputShown);
        progress->room -= std::min<std::uint64_t>(progress->room, kProgressFull.size());
        return progress;
    }

    void start_session(const json& id, const json& arguments) {
        const mcp::StartArguments start = mcp::parse_start_arguments(arguments, offered_);
        Offer& offer = offer_named(start.profile);
        if (sessions_.size() + starting_.size() >= max_sessions_)
            throw std::invalid_argument("this server keeps at most " +
                                        std::to_string(max_sessions_) +
                                        " sessions (--max-sessions): end one first");
        if (std::cmp_greater_equal(
                std::ranges::count(sessions_, client_,
                                   [](const auto& entry) { return entry.second.client; }) +
                    std::ranges::count(starting_, client_, &Starting::client),
                max_client_sessions_))
            throw std::invalid_argument("this server keeps at most " +
                                        std::to_string(max_client_sessions_) +
                                        " sessions a client (--max-client-sessions): end one "
                                        "first");
        if (start.requirements.empty()) {
            open_session(id, offer, nullptr);
            return;
        }
        starting_.push_back({id, client_, environments_.ask(index_of(offer), start.requirements)});
    }

    // The sessions whose packages were installed start now; those whose install failed are
    // answered with it. As client_ each (the protocol they negotiated).
    void start_sessions() {
        for (auto it = starting_.begin(); it != starting_.end();) {
            const AskedEnvironment& asked = *it->asked;
            if (asked.state == AskedEnvironment::State::installing) {
                ++it;
                continue;
            }
            client_ = it->client;
            if (asked.state == AskedEnvironment::State::failed) {
                respond(it->id, install_failure(asked, it->id));
            } else {
                try {
                    std::shared_ptr<Offer> environment = environments_.offer(asked);
                    open_session(it->id, *environment, environment);
                } catch (const std::runtime_error& e) {
                    respond(it->id, mcp::tool_error(std::string("the session's packages were "
                                                                "installed, but its sandbox "
                                                                "cannot be planned: ") +
                                                    e.what()));
                }
            }
            client_.clear();
            it = starting_.erase(it);
        }
    }

    // A session of client_'s, from `offer`'s pool, answered with its id.
    void open_session(const json& id, Offer& offer, std::shared_ptr<Offer> environment) {
        std::string session_id = encoding::random_hex(12);
        NamedSession& named = sessions_[session_id];
        named.offer = &offer;
        named.environment = std::move(environment);
        named.client = client_;
        named.started = named.last_call = Clock::now();
        named.session = take_from(offer);
        named.session->name_output("session-" + session_id, true);
        say("session " + session_id + " started (" + offer.name +
            (named.environment ? ", packages " + named.environment->plan->packages_id.substr(0, 12)
                               : std::string()) +
            ")");
        respond(id, mcp::text_result("session_id: " + session_id, {{"session_id", session_id}},
                                     protocol()));
    }

    void end_session(const json& id, const json& arguments) {
        const std::string session_id = mcp::parse_end_arguments(arguments);
        session_named(session_id);
        end_named_session(session_id, "end_session ended it");
        respond(id, mcp::text_result("session " + session_id + " ended",
                                     {{"session_id", session_id}, {"ended", true}}, protocol()));
    }

    // Ends a session for `why`. Calls still waiting for it are answered: the session they named
    // is gone. A cell still running is killed, and its call answered with what the kill left
    // (answer_sessions); the session goes then. Otherwise its sandbox is killed and reaped now.
    void end_named_session(const std::string& session_id, const std::string& why) {
        std::erase_if(waiting_, [&](const Call& call) {
            if (call.session_id != session_id) return false;
            respond(call.id, mcp::tool_error("session \"" + session_id +
                                             "\" ended before this "
                                             "call ran: " +
                                             why));
            return true;
        });
        NamedSession& named = sessions_.at(session_id);
        remember_end(session_id, why);
        say("session " + session_id + " ended: " + why);
        if (named.running) {
            named.ending = why;
            named.session->interrupt(true);
        } else {
            sessions_.erase(session_id);
        }
    }

    void remember_end(const std::string& session_id, const std::string& why) {
        if (ended_.size() == kRememberedEnds) ended_.pop_front();
        ended_.push_back({session_id, sessions_.at(session_id).client, why});
    }

    // limits.lifetime and limits.idle_timeout, as `pysandbox session` keeps them: a session ends
    // that long after it started, a running cell killed; or after that long without a call.
    Clock::time_point session_deadline(const NamedSession& named) const {
        const Limits& limits = named.offer->plan->profile.limits;
        Clock::time_point deadline = named.started + limits.lifetime;
        if (!named.running) deadline = std::min(deadline, named.last_call + limits.idle_timeout);
        return deadline;
    }

    void end_expired_sessions() {
        const Clock::time_point now = Clock::now();
        std::vector<std::pair<std::string, std::string>> expired;
        for (const auto& [session_id, named] : sessions_) {
            if (!named.ending.empty() || session_deadline(named) > now) continue;
            const Limits& limits = named.offer->plan->profile.limits;
            const bool lived = named.started + limits.lifetime <= now;
            expired.emplace_back(
                session_id, lived ? "its lifetime of " + units::format_duration(limits.lifetime) +
                                        " (limits.lifetime) was over"
                                  : "no call for " + units::format_duration(limits.idle_timeout) +
                                        " (limits.idle_timeout)");
        }
        for (const auto& [id, why] : expired) {
            const std::string& session_id = id;  // a lambda cannot capture a structured binding
            const bool waited_on = std::ranges::any_of(
                waiting_, [&](const Call& call) { return call.session_id == session_id; });
            if (!waited_on || why.starts_with("its lifetime")) end_named_session(session_id, why);
        }
    }

    // The clock is armed for the earliest session deadline, when that changed.
    void arm_session_clock() {
        std::optional<Clock::time_point> earliest;
        for (const auto& [session_id, named] : sessions_)
            if (named.ending.empty()) {
                const Clock::time_point deadline = session_deadline(named);
                if (!earliest || deadline < *earliest) earliest = deadline;
            }
        if (earliest == armed_for_) return;
        armed_for_ = earliest;
        if (earliest)
            session_clock_.arm(*earliest - Clock::now());
        else
            session_clock_.disarm();
    }

    // notifications/cancelled: a one-shot's sandbox dies now; a session's cell is interrupted as
    // its timeout would (the state survives when it stops); a call still waiting never runs.
    // None of them is answered (MCP "Cancellation").
    void cancel(const json& id) {
        if (std::erase_if(waiting_, [&](const Call& call) { return call.id == id; }) > 0) return;
        if (std::erase_if(starting_, [&](const Starting& start) { return start.id == id; }) > 0)
            return;
        if (const auto it =
                std::ranges::find(one_shots_, id, [](const OneShot& o) { return o.call.id; });
            it != one_shots_.end()) {
            it->call.offer->pool->retire(std::move(it->session));
            one_shots_.erase(it);
            say("a call was cancelled: its sandbox was killed");
            return;
        }
        for (auto& [session_id, named] : sessions_)
            if (named.running && named.running->id == id && !named.cancelled) {
                named.cancelled = true;
                named.session->interrupt();
                say("a call to session " + session_id + " was cancelled: its cell is interrupted");
            }
    }

    // ------------------------------------------------------------------ calls

    std::size_t running() const {
        return one_shots_.size() +
               static_cast<std::size_t>(std::ranges::count_if(
                   sessions_, [](const auto& entry) { return entry.second.running.has_value(); }));
    }

    // In arrival order, as many as the cap lets run; a session's calls one at a time, in order.
    void start_calls() {
        for (auto it = waiting_.begin(); it != waiting_.end() && running() < max_calls_;) {
            if (it->asked && !it->environment) {
                const AskedEnvironment& asked = *it->asked;
                if (asked.state == AskedEnvironment::State::installing) {
                    ++it;  // the calls behind it go on meanwhile
                    continue;
                }
                if (asked.state == AskedEnvironment::State::failed) {
                    client_ = it->client;
                    respond(it->id, install_failure(asked, it->id));
                    client_.clear();
                    it = waiting_.erase(it);
                    continue;
                }
                try {
                    it->environment = environments_.offer(asked);
                } catch (const std::runtime_error& e) {
                    respond(it->id,
                            mcp::tool_error(std::string("the call's packages were installed, but "
                                                        "its sandbox cannot be planned: ") +
                                            e.what()));
                    it = waiting_.erase(it);
                    continue;
                }
                it->offer = it->environment.get();
            }
            if (it->session_id.empty()) {
                OneShot one{std::move(*it), take_from(*it->offer)};
                one.session->name_output("call-" + std::to_string(++one_shot_count_), false);
                one.session->run(one.call.cell);
                one_shots_.push_back(std::move(one));
            } else {
                NamedSession& named = sessions_.at(it->session_id);
                if (named.running) {
                    ++it;
                    continue;
                }
                named.session->run(it->cell);
                named.running = std::move(*it);
                named.cancelled = false;
            }
            it = waiting_.erase(it);
        }
    }

    // A cell's result as `client` gets it: its big files offered as resources of the server's,
    // and linked by file:// as well on stdio only, where the client shares the filesystem.
    ordered_json result_of(ordered_json result, const std::string& client) {
        const mcp::FileOffer offer = [&](const ordered_json& file) {
            return offer_file(file, client);
        };
        return mcp::run_result(std::move(result), protocol_of(client), offer, !http_);
    }

    // ------------------------------------------------------------------ resources

    std::string offer_file(const ordered_json& file, const std::string& client) {
        const std::uint64_t size = file["size"].get<std::uint64_t>();
        if (!file["host_path"].is_string() || size > kResourceCap) return {};
        expire_resources();
        if (resources_.size() >= kMaxResources)
            resources_.erase(std::ranges::min_element(
                resources_, {}, [](const auto& entry) { return entry.second.made; }));
        const std::string name = file["path"].get<std::string>();
        // file_uri's encoding of the path, under a name of the server's own.
        std::string uri = "pysandbox://files/" + encoding::random_hex(8) + "/" +
                          mcp::file_uri(name).substr(std::string_view("file://").size());
        resources_[uri] = {client, file["host_path"].get<std::string>(),
                           name,   file["media_type"].get<std::string>(),
                           size,   Clock::now()};
        return uri;
    }

    void expire_resources() {
        const Clock::time_point now = Clock::now();
        std::erase_if(resources_, [&](const auto& entry) {
            return now - entry.second.made >= kResourceLifetime;
        });
    }

    ordered_json resource_list() {
        expire_resources();
        ordered_json list = ordered_json::array();
        for (const auto& [uri, resource] : resources_)
            if (resource.client == client_)
                list.push_back(
                    {{"uri", uri}, {"name", resource.name}, {"mimeType", resource.mime_type}});
        return list;
    }

    void read_resource(const json& id, const json& params) {
        const auto uri = params.find("uri");
        if (uri == params.end() || !uri->is_string())
            throw RpcError{kInvalidParams, "resources/read needs a \"uri\" (a string)"};
        expire_resources();
        const auto it = resources_.find(uri->get<std::string>());
        // Another client's resource is as absent to this one as one never made.
        if (it == resources_.end() || it->second.client != client_)
            throw RpcError{kResourceNotFound, "no resource " + uri->get<std::string>() +
                                                  " (a file of this client's calls, kept for " +
                                                  std::to_string(kResourceLifetime.count()) +
                                                  " h)"};
        const FileResource& resource = it->second;
        HostFile read = read_host_file(resource.host_path, kResourceCap, O_NOFOLLOW);
        if (read.problem != HostFile::Problem::none)
            throw RpcError{kResourceNotFound, "the server's copy of " + it->first + " is gone"};
        ordered_json content = {{"uri", it->first}, {"mimeType", resource.mime_type}};
        if (encoding::is_utf8(read.data))
            content["text"] = std::move(read.data);
        else
            content["blob"] = encoding::base64(read.data);
        respond(id, {{"contents", ordered_json::array({std::move(content)})}});
    }

    // Whether a call was answered. The sandboxes that served are retired once the answers are
    // written (served_).
    bool answer_one_shots() {
        bool answered = false;
        for (auto it = one_shots_.begin(); it != one_shots_.end();) {
            it->session->advance();
            if (auto result = it->session->take_result()) {
                answered = true;
                respond(it->call.id,
                        result_of(one_shot_result(std::move(*result)), it->call.client));
                served_.push_back({it->call.offer->pool.get(), std::move(it->session),
                                   std::move(it->call.environment)});
                it = one_shots_.erase(it);
            } else {
                ++it;
            }
        }
        return answered;
    }

    bool answer_sessions() {
        bool answered = false;
        for (auto& [session_id, named] : sessions_) {
            named.session->advance();
            auto result = named.session->take_result();
            if (!result) continue;
            if (named.running && !named.cancelled) {
                if (!named.ending.empty())
                    (*result)["message"] = "the session ended while this call ran (" +
                                           named.ending + "): the cell was killed";
                respond(named.running->id, result_of(std::move(*result), named.client));
                answered = true;
            }
            named.running.reset();
            named.cancelled = false;
        }
        std::erase_if(sessions_, [](const auto& entry) {
            return !entry.second.ending.empty() && !entry.second.running;
        });
        return answered;
    }

    // What was answered goes out now, as far as the client takes it without waiting; the rest
    // when poll says it can.
    void write_answers() {
        if (http_)
            http_->write_now();
        else
            loop_.output().write_now();
    }

    // A pool's replacement for the sandbox a call took is not started while that call's cell
    // runs: its clone holds the loop for milliseconds, and its interpreter starts on the cores
    // the cell runs on, while most cells take well under a millisecond. Nor, for kClientTurn,
    // once the answer is written: the client reading it would wait for a core as well, behind
    // the replacement and the served sandbox's end (killed then too). It starts after that when
    // no call runs and the killed sandboxes are reaped, or kRefillWait after the take, whichever
    // comes first: a long cell does not keep the pool empty for the calls that come meanwhile.
    void advance_pools(bool answered) {
        const Clock::time_point now = Clock::now();
        if (answered) client_turn_ = now + kClientTurn;
        const bool turn_over = now >= client_turn_;
        if (turn_over || loop_.stopping()) {
            for (Served& served : served_) served.pool->retire(std::move(served.session));
            served_.clear();
        }
        std::vector<Offer*> offers = environments_.offers();
        for (Offer& offer : offers_) offers.push_back(&offer);
        for (Offer* offer : offers) offer->pool->advance(false);
        // A sandbox killed (served, cancelled) is gone first: its end and a new start would
        // share the cores.
        const bool retiring =
            std::ranges::any_of(offers, [](const Offer* offer) { return offer->pool->retiring(); });
        const bool due = refill_due_ && now >= *refill_due_;
        const bool start = due || (turn_over && running() == 0 && !retiring);
        if (start) {
            std::size_t started = 0;
            for (Offer* offer : offers) started += offer->pool->refill();
            // Each clone left this process's pages shared with the new sandbox's init, so the
            // next call would fault on each page it writes (some twenty, a millisecond on a
            // paravirtualized guest); they are made this process's own now, while nothing waits.
            if (started > 0) sys::own_private_pages();
            refill_due_.reset();
        }
        std::optional<Clock::time_point> wake;
        if (!turn_over && (!served_.empty() || refill_due_)) wake = client_turn_;
        if (refill_due_ && (!wake || *refill_due_ < *wake)) wake = refill_due_;
        if (wake == refill_armed_) return;
        refill_armed_ = wake;
        if (wake)
            refill_clock_.arm(*wake - now);
        else
            refill_clock_.disarm();
    }

    // A warm sandbox for a call or a session: the pool's replacement is due kRefillWait later
    // at the latest (advance_pools).
    std::unique_ptr<Session> take_from(Offer& offer) {
        if (!refill_due_) refill_due_ = Clock::now() + kRefillWait;
        return offer.pool->take();
    }

    // ------------------------------------------------------------------ progress

    // Each running call's output since the last round, to the clients that asked (a cancelled
    // call's no more); the clock wakes the loop when one held back is due.
    void report_progress() {
        std::optional<Clock::time_point> due;
        auto report = [&](Call& call) {
            if (auto next = send_progress(call, false); next && (!due || *next < *due)) due = next;
        };
        for (OneShot& one : one_shots_) report(one.call);
        for (auto& [session_id, named] : sessions_)
            if (named.running && !named.cancelled) report(*named.running);
        if (due == progress_armed_) return;  // as it is: no system call in every round
        progress_armed_ = due;
        if (due)
            progress_clock_.arm(*due - Clock::now());
        else
            progress_clock_.disarm();
    }

    // Sends a notification with `call`'s text when kProgressEvery has passed since the last, or
    // at once when `final`; otherwise returns when it is due.
    std::optional<Clock::time_point> send_progress(Call& call, bool final) {
        Progress* progress = call.progress.get();
        if (progress == nullptr) return std::nullopt;
        for (OutputEvents::Piece& piece : progress->output.take(final)) {
            if (progress->full) break;
            std::string text = std::move(piece.bytes);
            if (!piece.text)
                text = "[" + std::to_string(text.size()) + " bytes of " +
                       (piece.channel == OutputSegment::kStdout ? "stdout" : "stderr") +
                       " that are not text: the result has them]\n";
            if (text.size() > progress->room) {
                text.resize(encoding::whole_characters(
                    std::string_view(text).substr(0, static_cast<std::size_t>(progress->room))));
                text += kProgressFull;
                progress->full = true;
            }
            progress->room -= std::min<std::uint64_t>(progress->room, text.size());
            progress->text += text;
        }
        if (progress->text.empty()) return std::nullopt;
        const Clock::time_point now = Clock::now();
        if (!final && now - progress->last < kProgressEvery) return progress->last + kProgressEvery;
        progress->sent += progress->text.size();
        progress->last = now;
        send({{"jsonrpc", "2.0"},
              {"method", "notifications/progress"},
              {"params",
               {{"progressToken", progress->token},
                {"progress", progress->sent},
                {"message", std::exchange(progress->text, {})}}}},
             call.id, false);
        return std::nullopt;
    }

    // ------------------------------------------------------------------ the end

    // The calls in flight are answered before the server goes: none is left without one.
    void on_signal(int sig) {
        say("signal " + std::to_string(sig) + ": stopping");
        const std::string why =
            "the server stopped (signal " + std::to_string(sig) + ") before this call finished";
        for (const Call& call : waiting_) respond(call.id, mcp::tool_error(why));
        for (const Starting& start : starting_) respond(start.id, mcp::tool_error(why));
        for (const OneShot& one : one_shots_) respond(one.call.id, mcp::tool_error(why));
        for (const auto& [session_id, named] : sessions_)
            if (named.running && !named.cancelled) respond(named.running->id, mcp::tool_error(why));
        stop(exit_codes::kSignalBase + sig);
    }

    // Everything ends now: the sandboxes are killed and reaped; what was written is flushed.
    void stop(int exit_code) {
        if (!loop_.stop(exit_code)) return;
        routes_.clear();
        batches_.clear();
        if (http_) http_->stop();
        waiting_.clear();
        starting_.clear();
        one_shots_.clear();
        served_.clear();
        sessions_.clear();
        environments_.close_pools();
        for (Offer* offer : environments_.offers()) offer->pool->close();
        for (Offer& offer : offers_) offer.pool->close();
    }

    FrontLoop loop_;  // first: the signals are blocked before the first sandbox is cloned
    std::vector<Offer> offers_;
    // The offers of the calls' and sessions' own packages, and their installs.
    RequestEnvironments environments_;
    std::vector<std::string> offered_;
    const std::size_t max_sessions_;
    const std::size_t max_calls_;
    const int verbose_;
    const ordered_json schema_;
    const std::size_t max_client_sessions_;
    const std::size_t max_batch_;  // messages in one batch
    const Unavailable unavailable_;
    std::unique_ptr<mcp::HttpTransport> http_;  // over HTTP; none on stdio
    // The version each client negotiated (stdio's: client ""); the latest until it does.
    std::map<std::string, const mcp::Protocol*> clients_;
    std::string client_;  // whose message is being read
    struct Route {
        std::uint64_t exchange;  // over HTTP; 0 on stdio
        std::string id;          // the client's own, as JSON text
        std::string client;
        std::uint64_t batch;  // the batch it came in; 0: alone
    };
    std::map<std::int64_t, Route> routes_;  // requests not answered yet, by our number
    std::int64_t routed_ = 0;
    std::uint64_t reading_ = 0;  // the exchange of the HTTP request being read
    // A batch: its responses, held until each of its requests is answered or cancelled.
    struct Batch {
        std::uint64_t exchange;
        std::string client;
        std::size_t requests;  // not answered yet
        bool read;             // each of its messages was read
        ordered_json responses;
    };
    std::map<std::uint64_t, Batch> batches_;
    std::uint64_t batch_count_ = 0;
    std::uint64_t reading_batch_ = 0;  // the batch of the message being read
    std::deque<Call> waiting_;
    std::deque<Starting> starting_;
    std::vector<OneShot> one_shots_;
    // The sandboxes of the calls answered, with their pools: killed after the client's turn.
    std::vector<Served> served_;
    std::map<std::string, NamedSession> sessions_;
    struct EndedSession {
        std::string id;
        std::string client;
        std::string why;
    };
    std::deque<EndedSession> ended_;
    sys::TimerFd session_clock_;
    sys::TimerFd progress_clock_;                      // a call's held-back progress is due
    std::optional<Clock::time_point> progress_armed_;  // for when, as armed
    sys::TimerFd refill_clock_;  // the pools' deferred replacements are due (advance_pools)
    std::optional<Clock::time_point> refill_due_;
    Clock::time_point client_turn_{};  // until when the client reads its answer
    std::optional<Clock::time_point> refill_armed_;
    std::optional<Clock::time_point> armed_for_;
    std::size_t one_shot_count_ = 0;
    std::map<std::string, FileResource> resources_;  // by URI
};

// Says on stderr why the server cannot run code, as main() says it for the other commands, and
// returns what a client is told on each call: that, and where the fix goes.
std::string start_up_error(std::string_view kind, std::string_view message) {
    const std::string line = std::string(kind) + ": " + std::string(message);
    pysandbox::say(line);
    return "pysandbox mcp cannot run code: " + line +
           "\nFix the server's command line (the arguments in this MCP client's configuration) "
           "and restart the server.";
}

// --http's address, token and limits; UsageError when they cannot be served securely.
mcp::HttpOptions http_options(const McpInvocation& invocation,
                              const std::vector<std::string>& host_env) {
    mcp::HttpOptions options;
    const auto address = mcp::parse_listen_address(invocation.http);
    if (!address)
        throw UsageError("--http " + invocation.http +
                         ": give PORT, ADDR:PORT or [IPV6]:PORT (e.g. --http 8080)");
    options.address = *address;
    std::string where;
    if (!invocation.http_token_file.empty()) {
        std::ifstream file(invocation.http_token_file);
        if (!file || !std::getline(file, options.token))
            throw UsageError("--http-token-file " + invocation.http_token_file +
                             ": cannot read a token from it");
        where = "--http-token-file " + invocation.http_token_file;
    } else {
        constexpr std::string_view kVariable = "PYSANDBOX_MCP_TOKEN=";
        for (const std::string& entry : host_env)
            if (entry.starts_with(kVariable)) {
                options.token = entry.substr(kVariable.size());
                where = "$PYSANDBOX_MCP_TOKEN";
            }
    }
    while (!options.token.empty() && (options.token.back() == '\r' || options.token.back() == ' ' ||
                                      options.token.back() == '\t'))
        options.token.pop_back();
    if (!where.empty() && options.token.size() < 16)
        throw UsageError("the bearer token of " + where +
                         " is shorter than 16 characters: make a longer one (e.g. head -c 24 "
                         "/dev/urandom | base64)");
    options.allowed_origins = invocation.http_allow_origins;
    options.max_body = kMaxMessage;
    options.max_clients = invocation.http_max_clients;
    options.max_client_requests = invocation.http_max_client_requests;
    return options;
}

std::string http_url(const mcp::ListenAddress& address, int port) {
    const std::string& host = address.host;
    return "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
           std::to_string(port) + "/mcp";
}

}  // namespace

int run_mcp(const McpInvocation& invocation, const std::vector<std::string>& host_env) {
    McpInvocation options = invocation;
    if (options.max_calls == 0) options.max_calls = online_cpus();
    std::optional<ScratchDir> scratch;
    std::vector<Offer> offers;
    // An MCP client shows its user what comes over the protocol, and seldom the server's stderr:
    // a server whose profiles cannot be planned says why on stderr, as main() would, and serves
    // it to the client as the answer to each call.
    Unavailable unavailable;
    try {
        if (!options.overrides.output_dir) {
            scratch.emplace("mcp");
            options.overrides.output_dir = scratch->files();
        }
        // Installed before anything is served: every sandbox of a profile mounts its packages.
        auto environments = env::profile_environments(options.profiles, options.overrides,
                                                      options.verbose, host_env);
        if (auto* failed = std::get_if<env::InstallFailure>(&environments))
            unavailable = {
                "pysandbox mcp cannot run code: install_error: the server's packages "
                "(python.requirements) could not be installed: " +
                    failed->message +
                    "\nFix the profile or its package sources and restart the server.",
                failed->exit_code};
        else
            offers = plan_offers(options.profiles, options.overrides,
                                 std::get<env::ProfileEnvironments>(environments), options.verbose,
                                 host_env);
    } catch (const ProfileError& e) {
        unavailable.message = start_up_error("profile error", e.what());
    } catch (const UsageError& e) {
        unavailable.message = start_up_error("error", e.what());
    } catch (const SysError& e) {
        unavailable.message = start_up_error("error", e.what());
    }
    // Over HTTP, options that cannot be served securely stop it here (exit 125), before a
    // sandbox starts: a server nobody can reach safely is no server.
    std::optional<mcp::HttpOptions> http;
    if (!options.http.empty()) http = http_options(options, host_env);
    Server server(std::move(offers), options, std::move(unavailable), http, host_env);
    if (http) pysandbox::say("mcp listening on " + http_url(http->address, server.port()));
    server.start_pools(options.pool);
    return server.run();
}

}  // namespace pysandbox
