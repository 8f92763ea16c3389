#include "engine/control_channel.hpp"

#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
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

// The message is a JSON object within the bounds, parsed; else null.
nlohmann::json parse_message(std::string_view text) {
    BoundedJson parsed = parse_bounded(text, {kMaxControlDepth, kMaxControlValues});
    return parsed.value.is_object() ? std::move(parsed.value) : nullptr;
}

}  // namespace

ControlChannel::ControlChannel() {
    int fds[2];
    check_sys(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds),
              "socketpair(AF_UNIX, SOCK_SEQPACKET) for the cell driver");
    own_.reset(fds[0]);
    child_.reset(fds[1]);
    // The child's end must block: the driver waits on it for the next cell.
    const int flags = ::fcntl(child_.get(), F_GETFL);
    check_sys(::fcntl(child_.get(), F_SETFL, flags & ~O_NONBLOCK), "fcntl(O_NONBLOCK)");
    // A record of 0 bytes reads like the end of the channel: with credentials on every record,
    // the end is the one read of 0 bytes that carries none (the script cannot fake it).
    const int on = 1;
    check_sys(::setsockopt(own_.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on),
              "setsockopt(control channel, SO_PASSCRED)");
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
    static thread_local char record[kControlRecord + 1];
    for (int i = 0; i < kRecordsPerRead && !closed_; ++i) {
        const auto [n, ended] = sys::receive_untrusted(own_.get(), record, sizeof record);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) return;
            closed_ = true;
            return;
        }
        if (ended) {
            closed_ = true;
            return;
        }
        if (static_cast<std::size_t>(n) > kControlRecord || n == 0) {
            // Not a record the driver writes: whatever message it was part of is lost.
            lose_message();
            continue;
        }
        add_record(record, static_cast<std::size_t>(n));
    }
}

// Records arrive numbered within their message. The driver sends a record again when a
// KeyboardInterrupt came between sending it and counting it: a record identical to the one before
// is that copy and is dropped (the driver never sends the same message twice in a row: each
// carries its cell's token). A record out of order or malformed loses its message (the rest of it
// is skipped); a message begun anew (record 0) replaces an unfinished one.
void ControlChannel::add_record(const char* data, std::size_t size) {
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
    nlohmann::json message = parse_message(partial_);
    if (message.is_object())
        inbox_.push_back(std::move(message));
    else
        ++dropped_;
    partial_.clear();
    expected_ = 0;
}

void ControlChannel::lose_message() {
    ++dropped_;
    previous_.clear();
    partial_.clear();
    partial_.shrink_to_fit();
    expected_ = 0;
}

std::optional<nlohmann::json> ControlChannel::receive() {
    if (inbox_.empty()) return std::nullopt;
    nlohmann::json message = std::move(inbox_.front());
    inbox_.pop_front();
    return message;
}

}  // namespace pysandbox
