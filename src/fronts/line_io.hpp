#pragma once
// Line-oriented input and output on descriptors a poll loop watches: requests in (NDJSON,
// JSON-RPC), results out, neither ever blocking the loop.

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <string>
#include <string_view>

#include "sys/poller.hpp"
#include "sys/write_size.hpp"

namespace pysandbox {

// Lines from a descriptor, read when poll() says something is there, so never blocking. A line
// over the reader's cap is not kept: it comes out as one `too_long` line.
class LineReader {
  public:
    struct Line {
        std::string text;
        bool too_long = false;
    };

    LineReader(int fd, std::size_t max_line) : fd_(fd), max_line_(max_line) {}
    int fd() const { return fd_; }
    // Reading pauses while this much waits: a client that writes requests without reading the
    // results is held back, rather than pysandbox's memory growing.
    bool wants_read() const { return !eof_ && buffer_.size() - start_ < 2 * max_line_; }
    void on_readable() {
        char chunk[65536];
        const ssize_t n = ::read(fd_, chunk, sizeof chunk);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
        if (n <= 0) {
            eof_ = true;
            return;
        }
        buffer_.append(chunk, static_cast<std::size_t>(n));
    }

    std::optional<Line> next() {
        const std::size_t newline = buffer_.find('\n', scanned_);
        if (newline == std::string::npos) {
            scanned_ = buffer_.size();
            if (buffer_.size() - start_ > max_line_) {  // drop what is kept of it
                skipping_ = true;
                buffer_.clear();
                start_ = scanned_ = 0;
            }
            if (!eof_ || (start_ == buffer_.size() && !skipping_)) return std::nullopt;
            return take(buffer_.size(), buffer_.size());  // the last line, without its newline
        }
        return take(newline, newline + 1);
    }

    // End of input, and every line taken.
    bool exhausted() const { return eof_ && start_ == buffer_.size() && !skipping_; }

  private:
    Line take(std::size_t end, std::size_t next_start) {
        Line line;
        line.too_long = skipping_;
        if (!skipping_ && end - start_ >= kMoveLine) {
            // A long line leaves with the buffer that holds it, rather than be copied out of it
            // (and the buffer kept at its size): one copy of a request in memory, not two.
            line.text = std::move(buffer_);
            buffer_.assign(line.text, next_start);
            line.text.erase(end).erase(0, start_);
            skipping_ = false;
            start_ = scanned_ = 0;
            return line;
        }
        if (!skipping_) line.text = buffer_.substr(start_, end - start_);
        skipping_ = false;
        start_ = scanned_ = next_start;
        if (start_ > (1 << 20) && start_ * 2 > buffer_.size()) {
            buffer_.erase(0, start_);
            start_ = scanned_ = 0;
        }
        return line;
    }

    static constexpr std::size_t kMoveLine = 64 * 1024;  // a read's worth

    int fd_;
    std::size_t max_line_;
    std::string buffer_;
    std::size_t start_ = 0;    // where the next line begins
    std::size_t scanned_ = 0;  // no newline before here
    bool eof_ = false;
    bool skipping_ = false;  // inside a line that was too long
};

// Text to a descriptor, written as poll() says it can take it.
class LineWriter {
  public:
    explicit LineWriter(int fd) : fd_(fd), chunk_(sys::write_size_after_pollout(fd)) {}
    int fd() const { return fd_; }
    void write(std::string_view text) {
        if (!broken_) pending_.append(text);
    }
    bool wants_write() const { return !broken_ && offset_ < pending_.size(); }
    // Writes now what the descriptor takes without waiting (a poll that does not wait says
    // whether it does), rather than at the loop's next round: an answer before slower work.
    void write_now() {
        pollfd ready{fd_, POLLOUT, 0};
        if (wants_write() && ::poll(&ready, 1, 0) == 1) on_writable();
    }
    bool flushed() const { return !wants_write(); }
    bool broken() const { return broken_; }
    void on_writable() {
        const ssize_t n =
            ::write(fd_, pending_.data() + offset_, std::min(chunk_, pending_.size() - offset_));
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
        if (n < 0) {  // the reader went away
            broken_ = true;
            pending_.clear();
            offset_ = 0;
            return;
        }
        offset_ += static_cast<std::size_t>(n);
        if (offset_ == pending_.size()) {
            pending_.clear();
            offset_ = 0;
        }
    }

  private:
    int fd_;
    std::size_t chunk_;
    std::string pending_;
    std::size_t offset_ = 0;
    bool broken_ = false;
};

// Reads `input` while `reading()` says so and it has room; writes `output` when it has something.
template <typename Reading>
void watch_lines(sys::Poller& poller, LineReader& input, LineWriter& output, Reading reading) {
    using Interest = sys::Poller::Interest;
    poller.watch(
        [&input, reading] {
            return Interest{input.wants_read() && reading() ? input.fd() : -1, POLLIN};
        },
        [&input](short) { input.on_readable(); });
    poller.watch(
        [&output] {
            return Interest{output.wants_write() ? output.fd() : -1, POLLOUT};
        },
        [&output](short revents) {
            if (revents & (POLLOUT | POLLERR | POLLHUP)) output.on_writable();
        });
}

}  // namespace pysandbox
