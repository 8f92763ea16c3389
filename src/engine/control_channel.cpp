#include "engine/control_channel.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

#include "report/json_text.hpp"
#include "sys/errors.hpp"
#include "sys/records.hpp"

namespace pysandbox {
namespace {

constexpr int kRecordsPerRead = 64;

// The driver writes ASCII JSON, every control character and the rest escaped (_dumps). Text
// with any other byte, a backslash that starts no JSON escape, or a string left open is none of
// its messages, and is dropped before the parser: the parser's error path copies the token it
// failed in, and a 30 MiB string cost over a second there, in the loop every sandbox shares.
bool plain_ascii_json(std::string_view text) {
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c < 0x20 || c > 0x7e) return false;
        if (c == '"') {
            in_string = !in_string;
        } else if (c == '\\' && in_string) {
            if (++i == text.size()) return false;
            switch (text[i]) {
                case '"':
                case '\\':
                case '/':
                case 'b':
                case 'f':
                case 'n':
                case 'r':
                case 't': break;
                case 'u':
                    if (text.size() - i <= 4) return false;
                    for (std::size_t k = 1; k <= 4; ++k)
                        if (!std::isxdigit(static_cast<unsigned char>(text[i + k]))) return false;
                    i += 4;
                    break;
                default: return false;
            }
        }
    }
    return !in_string;
}

// The message is a JSON object within the bounds, parsed; else null.
nlohmann::json parse_message(std::string_view text) {
    if (!plain_ascii_json(text)) return nullptr;
    BoundedJson parsed = parse_bounded(text, {kMaxControlDepth, kMaxControlValues});
    return parsed.value.is_object() ? std::move(parsed.value) : nullptr;
}

std::chrono::nanoseconds thread_cpu() {
    timespec now{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return std::chrono::seconds{now.tv_sec} + std::chrono::nanoseconds{now.tv_nsec};
}

// Options of the supervisor's end.
void own_end_options(int socket) {
    // A record of 0 bytes reads like the end of the channel: with credentials on every record,
    // the end is the one read of 0 bytes that carries none (the script cannot fake it).
    const int on = 1;
    check_sys(::setsockopt(socket, SOL_SOCKET, SO_PASSCRED, &on, sizeof on),
              "setsockopt(control channel, SO_PASSCRED)");
    // The kernel stamps each record as it is sent: a cell's time is the driver's, not the loop's.
    check_sys(::setsockopt(socket, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on),
              "setsockopt(control channel, SO_TIMESTAMPNS)");
}

}  // namespace

ControlChannel::ControlChannel(ControlBudget budget, Mode mode) : budget_(budget) {
    if (mode == Mode::listening) {
        own_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        check_sys(own_.get(), "socket(AF_UNIX, SOCK_SEQPACKET) for the cell driver");
        own_end_options(own_.get());  // the accepted connection inherits SO_PASSCRED
        listening_ = true;
        return;
    }
    int fds[2];
    check_sys(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds),
              "socketpair(AF_UNIX, SOCK_SEQPACKET) for the cell driver");
    own_.reset(fds[0]);
    child_.reset(fds[1]);
    // The child's end must block: the driver waits on it for the next cell.
    const int flags = ::fcntl(child_.get(), F_GETFL);
    check_sys(::fcntl(child_.get(), F_SETFL, flags & ~O_NONBLOCK), "fcntl(O_NONBLOCK)");
    own_end_options(own_.get());
}

int ControlChannel::fd() {
    if (!listening_ || listens_) return own_.get();
    listens_ = sys::listens(own_.get());
    return listens_ ? own_.get() : -1;
}

void ControlChannel::accept_connection() {
    sys::UniqueFd connection(::accept4(own_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!connection) return;  // none waiting (EAGAIN)
    own_end_options(connection.get());
    // The listener's only descriptor outside gVisor (the sandbox closed its own): closed, no
    // other connection can be made, whatever the script tries.
    own_ = std::move(connection);
    listening_ = false;
}

void ControlChannel::sandbox_gone() {
    if (!listening_) return;
    listens_ = true;  // whether it did or not: a listener that never listened holds nothing
    accept_connection();
    if (listening_) closed_ = true;
}

void ControlChannel::expect(std::string_view kind, std::string_view token) {
    expect({kind}, token);
}

void ControlChannel::expect(std::initializer_list<std::string_view> kinds, std::string_view token) {
    filter_ = Filter::head;
    heads_.clear();
    for (std::string_view kind : kinds) {
        std::string head = R"({"kind":")";
        head.append(kind).append("\"");
        if (!token.empty()) head.append(R"(,"token":")").append(token).append("\"");
        heads_.push_back(std::move(head));
    }
    bytes_ = 0;
    cpu_ = {};
    message_cpu_ = {};
    muted_ = false;
}

void ControlChannel::expect_nothing() {
    filter_ = Filter::none;
}

// The text is cut into records as it is written, never held whole: a cell's code and files are
// in the records once, not also in the whole text and in a copy of the message to write it from.
void ControlChannel::send(const nlohmann::json& message) {
    constexpr std::size_t kPayload = kControlRecord - kControlHeader;
    std::uint32_t index = 0;
    const auto add_record = [this, &index](char flag, std::string_view text) {
        char header[32];
        std::snprintf(header, sizeof header, "%c%0*x", flag, static_cast<int>(kControlIndexDigits),
                      static_cast<unsigned>(index++));
        std::string record;
        record.reserve(kControlHeader + text.size());
        record.append(header, kControlHeader).append(text);
        outbox_.push_back(std::move(record));
    };
    std::string rest;  // written, not yet in a record
    dump_line_pieces(
        message,
        [&](std::string_view piece) {
            rest.append(piece);
            std::size_t taken = 0;
            // The last record is the one left when the text ends: never empty, flagged last.
            for (; rest.size() - taken > kPayload; taken += kPayload)
                add_record(kControlMore, std::string_view(rest).substr(taken, kPayload));
            rest.erase(0, taken);
        },
        kPayload);
    add_record(kControlLast, rest);
}

void ControlChannel::on_writable() {
    while (!outbox_.empty()) {
        const std::string& record = outbox_.front();
        const ssize_t n = ::send(own_.get(), record.data(), record.size(), MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (n < 0) {  // EPIPE: the driver is gone; nothing will read the rest
            outbox_.clear();
            closed_ = true;
            return;
        }
        outbox_.pop_front();
    }
}

void ControlChannel::on_readable() {
    if (listening_) {  // a connection is waiting
        accept_connection();
        if (listening_) return;
    }
    if (muted_) {  // POLLIN was not asked for: POLLHUP or POLLERR
        closed_ = true;
        return;
    }
    static thread_local char record[kControlRecord + 1];
    const std::chrono::nanoseconds start = thread_cpu();
    taken_cpu_ = {};
    for (int i = 0; i < kRecordsPerRead && !closed_; ++i) {
        const std::chrono::nanoseconds before = thread_cpu();
        const auto [n, ended, sent] = sys::receive_untrusted(own_.get(), record, sizeof record);
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR) closed_ = true;
            break;
        }
        if (ended) {
            closed_ = true;
            break;
        }
        bytes_ += static_cast<std::uint64_t>(n);
        if (bytes_ > budget_.bytes) {
            mute();
            break;
        }
        if (static_cast<std::size_t>(n) > kControlRecord || n == 0) {
            // Not a record the driver writes: whatever message it was part of is lost.
            lose_message();
            continue;
        }
        // Receiving the message taken (its records and its parse) is not charged either.
        add_record(record, static_cast<std::size_t>(n), sent);
        message_cpu_ += thread_cpu() - before;
        if (expected_ == 0) {  // no message under way: taken, dropped or skipped
            if (just_taken_) taken_cpu_ += message_cpu_;
            message_cpu_ = {};
            just_taken_ = false;
        }
    }
    cpu_ += thread_cpu() - start - taken_cpu_;
    // The message under way is not charged yet: it may be the one taken (its size bounds it).
    // Taken, its cost comes back through taken_cpu_; lost or skipped, it stays in cpu_.
    if (cpu_ - message_cpu_ > budget_.cpu && !muted_) mute();
}

// Records arrive numbered within their message. The driver sends a record again when a
// KeyboardInterrupt came between sending it and counting it: a record identical to the one before
// is that copy and is dropped (the driver never sends the same message twice in a row: each
// carries its cell's token). A record out of order or malformed loses its message (the rest of it
// is skipped); a message begun anew (record 0) replaces an unfinished one, and one the reader
// does not wait for (wanted) is skipped, unread, to its last record.
void ControlChannel::add_record(const char* data, std::size_t size, const timespec& sent) {
    std::uint32_t index = 0;
    const char flag = size >= kControlHeader ? data[0] : '\0';
    const auto parsed = std::from_chars(data + 1, data + std::min(size, kControlHeader), index, 16);
    if ((flag != kControlMore && flag != kControlLast) || parsed.ptr != data + kControlHeader) {
        lose_message();
        return;
    }
    if (std::string_view(data, size) == previous_) return;  // sent again
    previous_.assign(data, size);
    if (index == 0) {
        if (expected_ > 0) lose_message();
        discarding_ = false;
        if (!wanted(std::string_view(data, size).substr(kControlHeader))) {
            discarding_ = flag == kControlMore;
            return;
        }
    } else if (discarding_) {
        discarding_ = flag == kControlMore;
        return;
    }
    if (index != expected_ || partial_.size() + (size - kControlHeader) > kMaxControlMessage) {
        lose_message();
        discarding_ = flag == kControlMore;
        return;
    }
    partial_.append(data + kControlHeader, size - kControlHeader);
    ++expected_;
    if (flag == kControlMore) return;
    take(sent);
}

// The first record of a message the reader waits for begins with its head, whole: then a comma
// or the end of the object.
bool ControlChannel::wanted(std::string_view text) const {
    switch (filter_) {
        case Filter::any: return true;
        case Filter::none: return false;
        case Filter::head: break;
    }
    return std::ranges::any_of(heads_, [text](const std::string& head) {
        return text.size() > head.size() && text.starts_with(head) &&
               (text[head.size()] == ',' || text[head.size()] == '}');
    });
}

// The message is whole: parsed, and taken if it is an object (just_taken_: what it cost is not
// charged to the budget, its size bounds that); what one that is dropped cost is charged.
void ControlChannel::take(const timespec& sent) {
    nlohmann::json message = parse_message(partial_);
    if (message.is_object()) {
        std::optional<std::chrono::system_clock::time_point> when;
        if (sent.tv_sec != 0 || sent.tv_nsec != 0)
            when = std::chrono::system_clock::time_point(
                std::chrono::duration_cast<std::chrono::system_clock::duration>(
                    std::chrono::seconds{sent.tv_sec} + std::chrono::nanoseconds{sent.tv_nsec}));
        inbox_.push_back({std::move(message), when});
        just_taken_ = true;
    } else {
        ++dropped_;
    }
    partial_.clear();
    expected_ = 0;
}

void ControlChannel::mute() {
    muted_ = true;
    ++mutes_;
    partial_.clear();
    partial_.shrink_to_fit();
    previous_.clear();
    expected_ = 0;
    message_cpu_ = {};   // the message lost stays charged
    discarding_ = true;  // the rest of the message being read, when the channel is heard again
}

void ControlChannel::lose_message() {
    ++dropped_;
    previous_.clear();
    partial_.clear();
    partial_.shrink_to_fit();
    expected_ = 0;
}

std::optional<ControlMessage> ControlChannel::receive() {
    if (inbox_.empty()) return std::nullopt;
    ControlMessage message = std::move(inbox_.front());
    inbox_.pop_front();
    return message;
}

}  // namespace pysandbox
