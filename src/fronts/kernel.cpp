#include "fronts/kernel.hpp"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "embed/version.hpp"
#include "engine/session.hpp"
#include "fronts/env.hpp"
#include "fronts/front_loop.hpp"
#include "fronts/kernel_wire.hpp"
#include "fronts/output_events.hpp"
#include "fronts/requests.hpp"
#include "plan/plan.hpp"
#include "plan/profile.hpp"
#include "report/exit_codes.hpp"
#include "report/json_text.hpp"
#include "report/result.hpp"
#include "sys/socket_owner.hpp"
#include "wire/fds.hpp"

namespace pysandbox {
namespace {

using jupyter::Message;
using nlohmann::json;

constexpr std::string_view kWho = "pysandbox kernel";

// A cell's output waits up to kStreamInterval, or until kStreamBytes have come, before it goes
// out as a stream message: each message costs the client a signature check and a JSON parse
// (jupyter_client does both in Python), and a print of 1 MiB sent as the pipe's 64 KiB reads was
// 1.6-1.8x slower to receive than ipykernel's single message (bench/kernel.py --until-idle).
// 50 ms is still "as it is printed" to whoever watches (ipykernel waits up to 200 ms).
constexpr auto kStreamInterval = std::chrono::milliseconds(50);
constexpr std::size_t kStreamBytes = std::size_t{1} << 20;

// Whether `code` is a whole statement, as a terminal reads one: an open bracket, a trailing
// backslash or a last line ending in ':' wants more ("incomplete", with the indent to go on).
json is_complete_reply(const std::string& code) {
    const int depth = open_brackets(code);
    const std::size_t last = code.find_last_not_of(" \t\r\n");
    const bool open =
        depth > 0 || (last != std::string::npos && (code[last] == '\\' || code[last] == ':'));
    if (depth < 0) return {{"status", "invalid"}};
    if (open) return {{"status", "incomplete"}, {"indent", "    "}};
    return {{"status", "complete"}};
}

// The MIME types a cell's output may have, and what each must be: the driver's word is the
// script's, so anything else is dropped here, before a client sees it.
enum class Mime { text, image, json_text };
struct MimeType {
    std::string_view name;
    Mime form;
    std::string_view signature;  // an image's first bytes, base64
};
constexpr std::array kMimeTypes = {
    MimeType{"text/plain", Mime::text, ""},      MimeType{"text/html", Mime::text, ""},
    MimeType{"text/markdown", Mime::text, ""},   MimeType{"text/latex", Mime::text, ""},
    MimeType{"image/svg+xml", Mime::text, ""},   MimeType{"image/png", Mime::image, "iVBORw0KGgo"},
    MimeType{"image/jpeg", Mime::image, "/9j/"}, MimeType{"application/json", Mime::json_text, ""},
};
constexpr JsonBounds kJsonOutputBounds{64, 65536};
constexpr int kQueuedPerConnection = 8;  // messages libzmq holds for the kernel, a connection
// What a client sends on iopub: subscriptions (Jupyter's clients subscribe to "", everything).
// libzmq keeps each one a byte a node, so a 16 MiB topic would cost the kernel hundreds of MiB.
constexpr std::int64_t kMaxSubscription = 4096;
// Requests that come while a cell runs wait in the kernel, signed ones only, at most so many and
// so many bytes: past that a request is answered with an error (a client without the key cannot
// make the kernel hold anything).
constexpr std::size_t kMaxHeld = 256;
constexpr std::size_t kMaxHeldBytes = 64 * 1024 * 1024;
// The display_id a cell's display() may give (IPython's own are 32 hex digits): longer ones are
// dropped, with the update that names one.
constexpr std::size_t kMaxDisplayId = 256;
// What a client's input_reply may hand a cell's input(): a line, not a file.
constexpr std::size_t kMaxInputValue = 1024 * 1024;

// A member of a cell's result, or null. What the session hands back carries what the driver inside
// wrote (the answer, the value, the rich output, the exception), which a cell can forge: no
// lookup may assume a member is there, or of the type the driver writes.
const json& member(const json& object, const char* name) {
    static const json kNull;
    if (!object.is_object()) return kNull;
    const auto it = object.find(name);
    return it != object.end() ? *it : kNull;
}

std::string string_member(const json& object, const char* name, const char* fallback) {
    const json& value = member(object, name);
    return value.is_string() ? value.get<std::string>() : std::string(fallback);
}

bool is_base64(std::string_view text) {
    return text.size() % 4 == 0 && std::ranges::all_of(text, [](unsigned char c) {
               return std::isalnum(c) || c == '+' || c == '/' || c == '=';
           });
}

// The bundle `data` as a client gets it: the known types whose value has their form, within
// what is left of the cell's `budget` of bytes; nothing when text/plain is not among them.
std::optional<json> checked_bundle(const json& data, std::size_t& budget) {
    if (!data.is_object()) return std::nullopt;
    json bundle = json::object();
    for (const auto& [name, value] : data.items()) {
        const auto type = std::ranges::find(kMimeTypes, name, &MimeType::name);
        if (type == kMimeTypes.end() || !value.is_string()) continue;
        const auto& text = value.get_ref<const std::string&>();
        if (text.size() > budget) continue;
        if (type->form == Mime::image) {
            if (!text.starts_with(type->signature) || !is_base64(text)) continue;
            bundle[name] = text;
        } else if (type->form == Mime::json_text) {
            BoundedJson parsed = parse_bounded(text, kJsonOutputBounds);
            if (parsed.problem != BoundedJson::Problem::none) continue;
            bundle[name] = std::move(parsed.value);
        } else {
            bundle[name] = text;
        }
        budget -= text.size();
    }
    if (!bundle.contains("text/plain")) return std::nullopt;
    return bundle;
}

// Who may connect: a connection from another user of this machine is shut down as soon as it is
// accepted, before the kernel reads what it sent. The key keeps such a user from being obeyed;
// this keeps them from being buffered: libzmq takes in a whole message, of any number of frames
// (ZMQ_MAXMSGSIZE bounds each), before it hands over any of it, so one unsigned message of 40
// frames of 15 MiB made the kernel hold 600 MiB. Each socket reports the connections it accepts
// on an inproc monitor that check() reads every round; the user is the connecting socket's owner
// (sys/socket_owner.hpp). The owner's own processes and root may connect; another machine's only
// when the connection file listens off this host.
class PeerGate {
  public:
    PeerGate(zmq::context_t& context, const std::string& ip)
        : context_(context), owner_(::geteuid()), listens_off_host_(!ip.starts_with("127.")) {}

    // Before `socket` is bound to `port`, so that no connection is missed.
    void watch(zmq::socket_t& socket, int port, std::string channel) {
        const std::string endpoint = "inproc://pysandbox-peers-" + channel;
        if (::zmq_socket_monitor(socket.handle(), endpoint.c_str(), ZMQ_EVENT_ACCEPTED) != 0)
            throw zmq::error_t();
        Monitor& monitor = monitors_.emplace_back(
            Monitor{zmq::socket_t(context_, zmq::socket_type::pair), port, std::move(channel)});
        monitor.events.connect(endpoint);
    }

    std::vector<int> fds() {
        std::vector<int> fds;
        for (Monitor& monitor : monitors_) fds.push_back(monitor.events.get(zmq::sockopt::fd));
        return fds;
    }

    // Every connection accepted since the last call: one not admitted is shut down (its
    // descriptor stays libzmq's, which sees the end and drops what it had of it).
    void check() {
        for (Monitor& monitor : monitors_)
            for (std::vector<zmq::message_t> parts; zmq::recv_multipart(
                     monitor.events, std::back_inserter(parts), zmq::recv_flags::dontwait);
                 parts.clear()) {
                std::uint16_t event = 0;
                std::int32_t fd = -1;
                if (parts.size() != 2 || parts[0].size() < sizeof event + sizeof fd) continue;
                std::memcpy(&event, parts[0].data(), sizeof event);
                std::memcpy(&fd, parts[0].data<char>() + sizeof event, sizeof fd);
                if (event == ZMQ_EVENT_ACCEPTED) check(fd, monitor);
            }
    }

  private:
    struct Monitor {
        zmq::socket_t events;
        int port;
        std::string channel;
    };

    void check(int fd, const Monitor& monitor) {
        // Gone already, or the number reused by another descriptor: nothing of this port's.
        const std::optional<sys::SocketPeer> peer = sys::tcp_peer(fd);
        if (!peer || peer->local_port != monitor.port) return;
        if (sys::admits(*peer, owner_, listens_off_host_)) return;
        ::shutdown(fd, SHUT_RDWR);
        ++refused_;
        if (refused_ <= 16 || (refused_ & (refused_ - 1)) == 0)
            say("closed a connection to " + monitor.channel + " from " +
                    (peer->uid ? "user " + std::to_string(*peer->uid)
                               : std::string("a user the kernel's socket diagnostics (inet_diag) "
                                             "did not name")) +
                    ": only the kernel's own user (" + std::to_string(owner_) +
                    ") and root may connect (" + std::to_string(refused_) + " so far)",
                kWho);
    }

    zmq::context_t& context_;
    const uid_t owner_;
    const bool listens_off_host_;
    std::vector<Monitor> monitors_;
    std::uint64_t refused_ = 0;
};

class Kernel {
  public:
    Kernel(const Plan& plan, const jupyter::Connection& connection)
        : plan_(plan),
          loop_(plan.ids.privileged, STDIN_FILENO, kMaxRequestLine),
          signer_(connection.key),
          session_id_(jupyter::random_id()),
          shell_(context_, zmq::socket_type::router),
          control_(context_, zmq::socket_type::router),
          stdin_(context_, zmq::socket_type::router),
          iopub_(context_, zmq::socket_type::pub),
          hb_(context_, zmq::socket_type::rep),
          peers_(context_, connection.ip) {
        // An oversized message closes its sender's connection, not the kernel.
        for (zmq::socket_t* socket : {&shell_, &control_, &stdin_, &hb_}) {
            socket->set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(kMaxRequestLine));
            // Every socket is read in each round, cell or not, and what is not signed is dropped
            // at once; still, what libzmq takes in between is bounded: a few messages a
            // connection (its default, 1000, would be 16 GiB), the rest waits on the sender's side.
            socket->set(zmq::sockopt::rcvhwm, kQueuedPerConnection);
        }
        iopub_.set(zmq::sockopt::maxmsgsize, kMaxSubscription);
        for (zmq::socket_t* socket : {&shell_, &control_, &stdin_, &iopub_, &hb_})
            socket->set(zmq::sockopt::linger, 0);
        const struct {
            zmq::socket_t& socket;
            int port;
            const char* channel;
        } channels[] = {{shell_, connection.shell_port, "shell"},
                        {control_, connection.control_port, "control"},
                        {stdin_, connection.stdin_port, "stdin"},
                        {iopub_, connection.iopub_port, "iopub"},
                        {hb_, connection.hb_port, "hb"}};
        for (const auto& channel : channels) {
            peers_.watch(channel.socket, channel.port, channel.channel);
            channel.socket.bind(connection.endpoint(channel.port));
        }
        loop_.watch_signals([this](int sig) { on_signal(sig); });
        // Each socket's ZMQ_FD and each monitor's, read in drain() every round.
        std::vector<int> fds = peers_.fds();
        for (zmq::socket_t* socket : {&shell_, &control_, &stdin_, &hb_})
            fds.push_back(socket->get(zmq::sockopt::fd));
        for (const int fd : fds)
            loop_.poller().watch([fd] { return sys::Poller::Interest{fd, POLLIN}; }, [](short) {});
    }

    int run() {
        new_session();
        publish("status", {{"execution_state", "starting"}}, json::object());
        for (;;) {
            loop_.poller().poll_once(output_wait_ms());
            session_->advance();
            for (auto& old : retired_) old->advance();
            std::erase_if(retired_, [](const auto& old) { return old->closed(); });
            if (const auto& failure = session_->start_failure()) {
                say(human_summary(plan_, *failure), kWho);
                return exit_codes::for_outcome(*failure);
            }
            send_output(false);
            while (auto result = session_->take_result()) finish_cell(without_output(*result));
            drain();
            if (loop_.stopping() && !closing_) {
                session_->close();
                closing_ = true;
            }
            if (closing_ && session_->closed()) return loop_.exit_code();
        }
    }

  private:
    void new_session() {
        session_ = std::make_unique<Session>(plan_, loop_.poller());
        session_->start();
    }

    // Every message waiting on every socket (ZMQ_FD says only that something changed), a cell
    // running or not: what is not signed goes at once, a request that starts a cell (or a
    // question to the driver) waits in held_ while one runs.
    void drain() {
        for (bool more = true; more && !loop_.stopping();) {
            more = false;
            peers_.check();
            more |= take(hb_, [this](const Frames& frames, std::size_t) {
                std::vector<zmq::const_buffer> parts;
                parts.reserve(frames.size());
                for (std::string_view frame : frames) parts.emplace_back(zmq::buffer(frame));
                (void)zmq::send_multipart(hb_, parts, zmq::send_flags::dontwait);
            });
            more |= take(control_, [this](const Frames& frames, std::size_t bytes) {
                if (auto message = parse(frames, "control")) {
                    // ipykernel takes shell's requests on control too; a cell's wait its turn.
                    if (starts_cell(*message))
                        queue(std::move(*message), control_, bytes);
                    else
                        on_request(*message, control_);
                }
            });
            more |= take(stdin_, [this](const Frames& frames, std::size_t) {
                if (auto message = parse(frames, "stdin")) on_stdin(*message);
            });
            more |= take(shell_, [this](const Frames& frames, std::size_t bytes) {
                if (auto message = parse(frames, "shell"))
                    queue(std::move(*message), shell_, bytes);
            });
            if (free() && !held_.empty()) {
                Held next = std::move(held_.front());
                held_.pop_front();
                held_bytes_ -= next.bytes;
                // stop_on_error: what was queued when a cell failed is aborted, no more.
                if (next.abort && jupyter::message_type(next.message) == "execute_request")
                    abort(next.message, *next.socket);
                else
                    on_request(next.message, *next.socket);
                more = true;
            }
        }
    }

    // No cell (nor question) runs: a request may start one.
    bool free() const { return session_->idle() && !cell_; }

    static bool starts_cell(const Message& message) {
        const std::string type = jupyter::message_type(message);
        return type == "execute_request" || type == "complete_request" || type == "inspect_request";
    }

    // A signed request: answered now when nothing runs or waits before it, else held.
    void queue(Message message, zmq::socket_t& socket, std::size_t bytes) {
        if (free() && held_.empty()) {
            on_request(message, socket);
            return;
        }
        hold(std::move(message), socket, bytes);
    }

    void hold(Message message, zmq::socket_t& socket, std::size_t bytes) {
        if (held_.size() >= kMaxHeld || held_bytes_ + bytes > kMaxHeldBytes) {
            refuse(message, socket);
            return;
        }
        held_bytes_ += bytes;
        held_.push_back(Held{std::move(message), &socket, bytes, false});
    }

    // A request past what the kernel holds while a cell runs: its reply says so.
    void refuse(const Message& request, zmq::socket_t& socket) {
        const std::string type = jupyter::message_type(request);
        const std::string why = "the kernel holds at most " + std::to_string(kMaxHeld) +
                                " requests (" + std::to_string(kMaxHeldBytes >> 20) +
                                " MiB) while a cell runs; this " +
                                (type.empty() ? std::string("message") : type) +
                                " was refused: send it again once the cell is done";
        say(why, kWho);
        if (!type.ends_with("_request")) return;
        publish("status", {{"execution_state", "busy"}}, request.header);
        reply(socket, request, type.substr(0, type.size() - 8) + "_reply",
              {{"status", "error"},
               {"ename", "SandboxError"},
               {"evalue", why},
               {"traceback", json::array({"SandboxError: " + why})}});
        publish("status", {{"execution_state", "idle"}}, request.header);
    }

    using Frames = std::vector<std::string_view>;

    // One message off `socket`, handed to `handle` as views of its frames with its size in bytes
    // (never copied: a 16 MiB frame that is not signed costs a read and a comparison).
    template <class Handle>
    bool take(zmq::socket_t& socket, Handle handle) {
        std::vector<zmq::message_t> parts;
        try {
            if (!zmq::recv_multipart(socket, std::back_inserter(parts), zmq::recv_flags::dontwait))
                return false;
        } catch (const zmq::error_t& e) {
            say(std::string("a message could not be read: ") + e.what(), kWho);
            return false;
        }
        Frames frames;
        frames.reserve(parts.size());
        std::size_t bytes = 0;
        for (const zmq::message_t& part : parts) {
            frames.emplace_back(part.data<char>(), part.size());
            bytes += part.size();
        }
        try {
            handle(frames, bytes);
        } catch (const std::exception& e) {  // a client's doing must never end the kernel
            say(std::string("a request was dropped: ") + e.what(), kWho);
        }
        return true;
    }

    // The message when it is signed, new and well formed; else nothing, counted and logged (the
    // first ones, then at each power of two: a flood must not fill the kernel's log).
    std::optional<Message> parse(const Frames& frames, std::string_view channel) {
        std::string why;
        std::optional<Message> message = signer_.parse(frames, why);
        if (!message) {
            ++dropped_;
            if (dropped_ <= 16 || (dropped_ & (dropped_ - 1)) == 0)
                say("dropped a message on " + std::string(channel) + ": " + why + " (" +
                        std::to_string(dropped_) + " dropped so far)",
                    kWho);
        }
        return message;
    }

    // An input_reply to the running cell's input(): from the client that sent the cell, to this
    // input_request (jupyter_client's KernelClient.input() sends no parent header; one that names
    // another message is not this answer). Anything else on stdin is dropped.
    void on_stdin(const Message& message) {
        const std::string type = jupyter::message_type(message);
        std::string why;
        if (type != "input_reply")
            why = "a " + (type.empty() ? std::string("message without a type") : type);
        else if (!input_request_ || !cell_)
            why = "an input_reply while no input() waits";
        else if (message.identities != cell_->request.identities)
            why = "an input_reply from another client than the cell's";
        else if (!message.parent.empty() && member(message.parent, "msg_id") != *input_request_)
            why = "an input_reply to another request";
        if (!why.empty()) {
            say("dropped " + why + " on stdin", kWho);
            return;
        }
        input_request_.reset();
        const json& value = member(message.content, "value");
        if (!value.is_string())
            session_->refuse_input("the client's input_reply had no string \"value\"");
        else if (value.get_ref<const std::string&>().size() > kMaxInputValue)
            session_->refuse_input("the client's answer was over " +
                                   std::to_string(kMaxInputValue) + " bytes");
        else
            session_->answer_input(value.get_ref<const std::string&>());
    }

    // The running cell's input() or getpass(): an input_request on stdin, to the client that sent
    // the cell, its parent the execute_request. A request while one waits replaces it (the cell
    // was interrupted and asks again; the session bounds how often).
    void ask_input(const std::string& prompt, bool password) {
        if (!cell_) return;
        input_request_ = send(stdin_, cell_->request.identities, "input_request",
                              cell_->request.header, {{"prompt", prompt}, {"password", password}});
    }

    // A frame for ZeroMQ. A large one (a stream message's text) is handed over rather than
    // copied: its copy would be a fresh buffer paged in for each message; ZeroMQ's I/O thread
    // frees it once it is written.
    static zmq::message_t message_of(std::string frame) {
        constexpr std::size_t kHandOverFrom = 64 * 1024;
        if (frame.size() < kHandOverFrom) return zmq::message_t(frame.data(), frame.size());
        auto* owned = new std::string(std::move(frame));
        return zmq::message_t(
            owned->data(), owned->size(),
            [](void*, void* hint) { delete static_cast<std::string*>(hint); }, owned);
    }

    // Sends a message; returns its msg_id.
    std::string send(zmq::socket_t& socket, const std::vector<std::string>& identities,
                     const std::string& type, const json& parent, const json& content,
                     const json& metadata = json::object()) {
        return send_text(socket, identities, type, parent, dump_line(content), metadata);
    }

    // The same with the content as JSON text already.
    std::string send_text(zmq::socket_t& socket, const std::vector<std::string>& identities,
                          const std::string& type, const json& parent, std::string content,
                          const json& metadata = json::object()) {
        const json header = jupyter::make_header(session_id_, type);
        std::vector<std::string> frames = jupyter::frames_with_content(
            signer_, identities, header, parent, std::move(content), metadata);
        std::vector<zmq::message_t> parts;
        parts.reserve(frames.size());
        for (std::string& frame : frames) parts.push_back(message_of(std::move(frame)));
        try {
            (void)zmq::send_multipart(socket, parts, zmq::send_flags::dontwait);
        } catch (const zmq::error_t& e) {
            say("a " + type + " could not be sent: " + e.what(), kWho);
        }
        return header["msg_id"].get<std::string>();
    }

    void publish(const std::string& type, const json& content, const json& parent) {
        (void)send(iopub_, {type}, type, parent, content);
    }

    void reply(zmq::socket_t& socket, const Message& request, const std::string& type,
               const json& content, const json& metadata = json::object()) {
        (void)send(socket, request.identities, type, request.header, content, metadata);
    }

    void on_request(const Message& request, zmq::socket_t& socket) {
        const std::string type = jupyter::message_type(request);
        publish("status", {{"execution_state", "busy"}}, request.header);
        const auto string_field = [&](const char* name) {
            const auto it = request.content.find(name);
            return it != request.content.end() && it->is_string() ? it->get<std::string>()
                                                                  : std::string();
        };
        if (type == "execute_request") {
            start_cell(request, socket);
            return;  // idle once the cell has its result
        }
        if (type == "kernel_info_request") {
            reply(socket, request, "kernel_info_reply", kernel_info());
        } else if (type == "is_complete_request") {
            reply(socket, request, "is_complete_reply", is_complete_reply(string_field("code")));
        } else if (type == "comm_info_request") {
            reply(socket, request, "comm_info_reply",
                  {{"status", "ok"}, {"comms", json::object()}});
        } else if (type == "complete_request" || type == "inspect_request") {
            const auto pos = request.content.find("cursor_pos");
            const std::string code = string_field("code");
            const std::int64_t cursor = pos != request.content.end() && pos->is_number_integer()
                                            ? pos->get<std::int64_t>()
                                            : static_cast<std::int64_t>(code.size());
            start_query(request, socket, type == "complete_request" ? "complete" : "inspect", code,
                        cursor);
            return;  // idle once the driver has answered
        } else if (type == "history_request") {
            reply(socket, request, "history_reply", {{"status", "ok"}, {"history", json::array()}});
        } else if (type == "interrupt_request") {
            if (cell_) session_->interrupt();
            reply(socket, request, "interrupt_reply", {{"status", "ok"}});
        } else if (type == "shutdown_request") {
            const auto it = request.content.find("restart");
            const bool restart = it != request.content.end() && it->is_boolean() && it->get<bool>();
            json content = {{"status", "ok"}, {"restart", restart}};
            reply(socket, request, "shutdown_reply", content);
            publish("shutdown_reply", content, request.header);
            if (restart) {
                // A new sandbox: the old one's state is gone with it, and so is a running cell,
                // which is answered rather than left waiting.
                if (cell_) end_cell_at_restart();
                session_->close();
                retired_.push_back(std::exchange(session_, nullptr));
                new_session();
                execution_count_ = 0;
            } else {
                loop_.stop(0);
            }
        } else {
            say("no answer to a " + (type.empty() ? std::string("message without a type") : type),
                kWho);
        }
        publish("status", {{"execution_state", "idle"}}, request.header);
    }

    void end_cell_at_restart() {
        const RunningCell cell = std::move(*cell_);
        cell_.reset();
        input_request_.reset();
        const std::string why = "the kernel was restarted while the cell ran; its state is gone";
        reply(*cell.socket, cell.request,
              cell.query.empty() ? "execute_reply" : cell.query + "_reply",
              {{"status", "error"},
               {"ename", "SandboxError"},
               {"evalue", why},
               {"traceback", json::array({"SandboxError: " + why})}});
        publish("status", {{"execution_state", "idle"}}, cell.request.header);
    }

    json kernel_info() const {
        return {{"status", "ok"},
                {"protocol_version", "5.3"},
                {"implementation", "pysandbox"},
                {"implementation_version", kVersion},
                {"language_info",
                 {{"name", "python"},
                  {"version", "3"},
                  {"mimetype", "text/x-python"},
                  {"file_extension", ".py"},
                  {"pygments_lexer", "ipython3"},
                  {"codemirror_mode", {{"name", "ipython"}, {"version", 3}}},
                  {"nbconvert_exporter", "python"}}},
                {"banner", "pysandbox " + std::string(kVersion) +
                               ": Python in a sandbox (profile " + plan_.profile.name + ")"},
                {"help_links", json::array()}};
    }

    struct RunningCell {
        Message request;
        zmq::socket_t* socket;
        bool silent;
        bool store_history;
        bool stop_on_error = true;
        std::string query;  // "complete" or "inspect": a question, not a cell
    };

    // A complete or inspect request, answered by the driver from the session's namespace, as a
    // cell of the session (so with its timeout and interrupt); its output is not shown.
    void start_query(const Message& request, zmq::socket_t& socket, const std::string& kind,
                     const std::string& code, std::int64_t cursor) {
        Cell cell;
        cell.query = {{"kind", kind}, {"code", code}, {"cursor", cursor}};
        cell_.emplace(RunningCell{request, &socket, true, false, false, kind});
        session_->run(std::move(cell));
    }

    void finish_query(const RunningCell& cell, const json& result) {
        const json& answer = member(result, "answer");
        const std::string type = cell.query + "_reply";
        if (string_member(result, "status", "") != "ok" || !answer.is_object()) {
            json content = error_of(result);
            content["status"] = "error";
            reply(*cell.socket, cell.request, type, content);
        } else if (cell.query == "complete") {
            json matches = json::array();
            if (const auto found = answer.find("matches");
                found != answer.end() && found->is_array())
                for (const json& match : *found)
                    if (match.is_string() && matches.size() < kMaxCellMatches)
                        matches.push_back(match);
            const auto position = [&](const char* name) {
                const auto it = answer.find(name);
                return it != answer.end() && it->is_number_unsigned() ? it->get<std::uint64_t>()
                                                                      : std::uint64_t{0};
            };
            const std::uint64_t end = position("cursor_end");
            reply(*cell.socket, cell.request, type,
                  {{"status", "ok"},
                   {"matches", std::move(matches)},
                   {"cursor_start", std::min(position("cursor_start"), end)},
                   {"cursor_end", end},
                   {"metadata", json::object()}});
        } else {
            const auto text = answer.find("text");
            const bool found = member(answer, "found") == true && text != answer.end() &&
                               text->is_string() &&
                               text->get_ref<const std::string&>().size() <= kMaxCellRich;
            reply(*cell.socket, cell.request, type,
                  {{"status", "ok"},
                   {"found", found},
                   {"data", found ? json{{"text/plain", *text}} : json::object()},
                   {"metadata", json::object()}});
        }
        publish("status", {{"execution_state", "idle"}}, cell.request.header);
    }

    // An execute request queued behind one that failed (stop_on_error), as ipykernel answers it.
    void abort(const Message& request, zmq::socket_t& socket) {
        publish("status", {{"execution_state", "busy"}}, request.header);
        reply(socket, request, "execute_reply", {{"status", "aborted"}});
        publish("status", {{"execution_state", "idle"}}, request.header);
    }

    void start_cell(const Message& request, zmq::socket_t& socket) {
        const auto code_it = request.content.find("code");
        const std::string code = code_it != request.content.end() && code_it->is_string()
                                     ? code_it->get<std::string>()
                                     : std::string();
        const auto flag = [&](const char* name, bool fallback) {
            const auto it = request.content.find(name);
            return it != request.content.end() && it->is_boolean() ? it->get<bool>() : fallback;
        };
        const bool silent = flag("silent", false);
        const bool store_history = silent ? false : flag("store_history", true);
        if (store_history) ++execution_count_;
        if (!silent)
            publish("execute_input", {{"code", code}, {"execution_count", execution_count_}},
                    request.header);
        Cell cell;
        cell.code = code;
        cell.rich = !silent;
        cell.on_output = output_.observer();
        // allow_stdin: the client answers input requests on its stdin channel.
        if (flag("allow_stdin", false))
            cell.on_input = [this](const std::string& prompt, bool password) {
                ask_input(prompt, password);
            };
        cell_.emplace(
            RunningCell{request, &socket, silent, store_history, flag("stop_on_error", true), {}});
        session_->run(std::move(cell));
    }

    // How long the loop may wait before the output held back must go (poll(2)'s timeout).
    int output_wait_ms() const {
        const auto since = output_.pending_since();
        if (!cell_ || !since) return -1;
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(
            *since + kStreamInterval - std::chrono::steady_clock::now());
        return static_cast<int>(std::max<std::chrono::milliseconds::rep>(left.count(), 0));
    }

    // The running cell's output, as stream messages: all of it when `final` (the cell ended),
    // otherwise once kStreamInterval has passed since the oldest byte came or kStreamBytes wait.
    void send_output(bool final) {
        if (!cell_) return;
        if (!final && output_.pending_bytes() < kStreamBytes && output_wait_ms() != 0) return;
        // {"name": ..., "text": ...} as dump_line writes it, the text escaped straight from the
        // held output into the message's frame.
        output_.take_each(final, [this](OutputSegment::Channel channel, std::string_view bytes,
                                        bool /*text*/) {
            if (cell_->silent) return;
            std::string content = channel == OutputSegment::kStdout ? R"({"name":"stdout","text":)"
                                                                    : R"({"name":"stderr","text":)";
            append_json_string(content, bytes);
            content += '}';
            (void)send_text(iopub_, {"stream"}, "stream", cell_->request.header,
                            std::move(content));
        });
    }

    // The cell's result as the kernel reads it: its stdout, stderr and their order went out as
    // stream messages while it ran (every byte the result holds, OutputObserver), and are not
    // copied into the kernel's tree again.
    static json without_output(nlohmann::ordered_json& result) {
        for (const char* name : {"stdout", "stderr", "output"}) result.erase(name);
        return result;
    }

    void finish_cell(const json& result) {
        send_output(true);
        if (!cell_) return;
        const RunningCell cell = std::move(*cell_);
        cell_.reset();
        input_request_.reset();
        try {
            if (cell.query.empty())
                finish_execute(cell, result);
            else
                finish_query(cell, result);
        } catch (const std::exception& e) {  // a cell's doing must never end the kernel either
            say(std::string("a cell's result could not be shown: ") + e.what(), kWho);
            reply(*cell.socket, cell.request,
                  cell.query.empty() ? "execute_reply" : cell.query + "_reply",
                  {{"status", "error"},
                   {"ename", "SandboxError"},
                   {"evalue", "the cell's result was malformed"},
                   {"traceback", json::array()}});
            publish("status", {{"execution_state", "idle"}}, cell.request.header);
        }
    }

    void finish_execute(const RunningCell& cell, const json& result) {
        const json& parent = cell.request.header;
        const std::string status = string_member(result, "status", "error");
        if (!cell.silent) show_output(result, status == "ok", parent);
        json content = {{"status", "ok"}, {"execution_count", execution_count_}};
        if (status == "ok") {
            content["user_expressions"] = json::object();
            content["payload"] = json::array();
        } else {
            json error = error_of(result);
            if (!cell.silent) publish("error", error, parent);
            content.update(error);
            content["status"] = "error";
        }
        // stop_on_error: the requests that came while the cell ran are held (their execute
        // requests to be aborted) before its reply goes out, so that one a client sends on
        // seeing the reply is not taken for queued.
        if (status != "ok" && cell.stop_on_error) abort_queued();
        reply(*cell.socket, cell.request, "execute_reply", content,
              {{"pysandbox", verdict_of(result)}});
        publish("status", {{"execution_state", "idle"}}, parent);
    }

    // stop_on_error: what waits (held, or still in the shell socket) is aborted.
    void abort_queued() {
        const auto hold_one = [this](const Frames& frames, std::size_t bytes) {
            if (auto message = parse(frames, "shell")) hold(std::move(*message), shell_, bytes);
        };
        for (std::size_t read = 0; read < kMaxHeld && take(shell_, hold_one); ++read) {
        }
        for (Held& held : held_) held.abort = true;
    }

    // What the cell displayed (display(), plt.show()), cleared (clear_output()) and updated
    // (update_display()) in order, its value, then the figures it left open, as IPython shows
    // them. Every bundle is checked (checked_bundle) and all of them together are at most
    // kMaxCellRich bytes; figures are the session's, PNG already checked. At most
    // kMaxCellFigures displays and as many clears.
    void show_output(const json& result, bool ok, const json& parent) {
        static const json kNone = json::array();
        const json& rich = member(result, "rich");
        const json& figures =
            member(result, "figures").is_array() ? member(result, "figures") : kNone;
        std::size_t budget = kMaxCellRich;
        std::vector<bool> shown(figures.size(), false);
        const auto display = [&](json data, const json& item = json()) {
            const bool update = member(item, "update") == true;
            json transient = json::object();
            if (const json& id = member(item, "display_id");
                id.is_string() && id.get_ref<const std::string&>().size() <= kMaxDisplayId)
                transient["display_id"] = id;
            else if (update)
                return;  // an update names the display it updates
            publish(update ? "update_display_data" : "display_data",
                    {{"data", std::move(data)},
                     {"metadata", json::object()},
                     {"transient", std::move(transient)}},
                    parent);
        };
        const auto figure = [&](std::size_t index) {
            shown[index] = true;
            display({{"image/png", member(figures[index], "data")}});
        };
        if (member(rich, "displays").is_array()) {
            std::size_t count = 0;
            std::size_t clears = 0;
            for (const json& item : member(rich, "displays")) {
                if (const json& wait = member(item, "clear"); wait.is_boolean()) {
                    if (++clears <= kMaxCellFigures)
                        publish("clear_output", {{"wait", wait.get<bool>()}}, parent);
                    continue;
                }
                if (++count > kMaxCellFigures) break;
                if (!item.is_object()) continue;
                const json& index = item.value("figure", json());
                if (index.is_number_unsigned() && index.get<std::size_t>() < figures.size()) {
                    if (!shown[index.get<std::size_t>()]) figure(index.get<std::size_t>());
                } else if (auto data = checked_bundle(item.value("data", json()), budget)) {
                    display(std::move(*data), item);
                }
            }
        }
        if (ok && member(result, "value").is_string()) {
            json data = {{"text/plain", member(result, "value")}};
            if (rich.is_object())
                if (auto bundle = checked_bundle(rich.value("value", json()), budget))
                    data = std::move(*bundle);
            publish("execute_result",
                    {{"execution_count", execution_count_},
                     {"data", std::move(data)},
                     {"metadata", json::object()}},
                    parent);
        }
        for (std::size_t index = 0; index < figures.size(); ++index)
            if (!shown[index]) figure(index);
    }

    // The sandbox's word on the cell, for the execute_reply's metadata: ename and evalue can be
    // the cell's own (it may raise a TimeoutError of its own, naming a limit), these members are
    // the session's, from the host: how the cell ended, pysandbox's exit code for it, whether the
    // state was kept, what was refused, what it used.
    static json verdict_of(const json& result) {
        json verdict = json::object();
        for (const char* name : {"status", "state", "exit_code", "signal", "pysandbox_exit_code",
                                 "message", "violations", "warnings", "truncated", "usage"})
            verdict[name] = member(result, name);
        return verdict;
    }

    // ename, evalue and the traceback's lines: Python's exception as the cell raised it, or what
    // the sandbox did to the cell (a limit, with whether the state was kept).
    static json error_of(const json& result) {
        const json& exception = member(result, "exception");
        const std::string message = member(result, "message").is_string()
                                        ? member(result, "message").get<std::string>()
                                        : string_member(result, "status", "error");
        if (exception.is_object() && member(result, "status") == "exception") {
            json lines = json::array();
            const std::string text = string_member(exception, "traceback", "");
            for (std::size_t start = 0; start < text.size();) {
                const std::size_t end = text.find('\n', start);
                lines.push_back(text.substr(start, end == std::string::npos ? end : end - start));
                if (end == std::string::npos) break;
                start = end + 1;
            }
            return {{"ename", member(exception, "type")},
                    {"evalue", member(exception, "message")},
                    {"traceback", lines}};
        }
        const std::string status = string_member(result, "status", "error");
        const std::string ename = status == "timeout" ? "TimeoutError" : "SandboxError";
        return {{"ename", ename},
                {"evalue", message},
                {"traceback", json::array({ename + ": " + message})}};
    }

    void on_signal(int sig) {
        if (sig == SIGINT) {  // a kernelspec's interrupt_mode "signal": the running cell only
            if (cell_) session_->interrupt();
            return;
        }
        loop_.stop(exit_codes::kSignalBase + sig);
    }

    const Plan& plan_;
    FrontLoop loop_;  // first: the signals are blocked before zmq's threads and the sandboxes
    jupyter::Signer signer_;
    const std::string session_id_;
    zmq::context_t context_;
    zmq::socket_t shell_;
    zmq::socket_t control_;
    zmq::socket_t stdin_;
    zmq::socket_t iopub_;
    zmq::socket_t hb_;
    PeerGate peers_;
    std::unique_ptr<Session> session_;
    std::vector<std::unique_ptr<Session>> retired_;  // closing after a restart
    std::optional<RunningCell> cell_;
    OutputEvents output_;
    int execution_count_ = 0;
    bool closing_ = false;
    // Signed requests that came while a cell ran, answered in order once it is done; execute
    // requests queued when a cell failed (stop_on_error) are aborted. At most kMaxHeld and
    // kMaxHeldBytes.
    struct Held {
        Message message;
        zmq::socket_t* socket;
        std::size_t bytes;
        bool abort;
    };
    std::deque<Held> held_;
    std::size_t held_bytes_ = 0;
    std::uint64_t dropped_ = 0;                 // messages not signed, replayed or malformed
    std::optional<std::string> input_request_;  // the msg_id of the one the cell waits on
};

}  // namespace

int run_kernel(const KernelInvocation& invocation, const std::vector<std::string>& host_env) {
    const jupyter::Connection connection =
        jupyter::read_connection_file(invocation.connection_file);
    Profile profile = load_profile(invocation.profile, profile_search_dirs());
    Request request;
    request.program.kind = Program::Kind::driver;
    request.overrides = invocation.overrides;
    // Installed before the kernel answers: every sandbox of it mounts them.
    if (const auto failed = env::profile_packages(invocation.profile, request.overrides,
                                                  invocation.verbose, host_env))
        return *failed;
    request.capture_output = true;
    request.verbose = invocation.verbose;
    std::unique_ptr<const Plan> plan = make_plan(std::move(profile), request, host_env);
    Kernel kernel(*plan, connection);
    return kernel.run();
}

}  // namespace pysandbox
