#include "stream.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cerrno>

namespace pysandbox {

void Transcript::append(Channel channel, std::string_view bytes) {
    if (bytes.empty()) return;
    if (chunks_.empty() || chunks_.back().first != channel) chunks_.emplace_back(channel, "");
    chunks_.back().second.append(bytes);
}

std::string Transcript::text(Channel channel) const {
    std::string out;
    for (const auto& [from, bytes] : chunks_)
        if (from == channel) out += bytes;
    return out;
}

std::string Transcript::interleaved() const {
    std::string out;
    for (const auto& chunk : chunks_) out += chunk.second;
    return out;
}

void TailRing::push(const char* data, std::size_t n) {
    if (capacity_ == 0) {
        omitted_ += n;
        return;
    }
    if (n >= capacity_) {  // only the newest capacity_ bytes can survive
        omitted_ += ring_.size() + (n - capacity_);
        ring_.assign(data + n - capacity_, data + n);
        next_ = 0;
        return;
    }
    for (std::size_t i = 0; i < n; ++i) {
        if (ring_.size() < capacity_) {
            ring_.push_back(data[i]);
        } else {
            ring_[next_] = data[i];
            next_ = (next_ + 1) % capacity_;
            ++omitted_;
        }
    }
}

std::string TailRing::drain() {
    std::string out;
    if (omitted_ > 0) out = "\n[... " + std::to_string(omitted_) + " bytes omitted ...]\n";
    out.append(ring_.begin() + static_cast<long>(next_), ring_.end());
    out.append(ring_.begin(), ring_.begin() + static_cast<long>(next_));
    ring_.clear();
    next_ = 0;
    return out;
}

Stream::Stream(sys::UniqueFd from, sys::UniqueFd to, std::size_t write_chunk,
               OutputBudget* budget)
    : from_(std::move(from)),
      to_(std::move(to)),
      write_chunk_(write_chunk),
      budget_(budget),
      tail_(budget ? budget->tail_capacity : 0) {}

Stream Stream::preloaded(std::string content, sys::UniqueFd to) {
    Stream stream(sys::UniqueFd{}, std::move(to), PIPE_BUF);
    stream.pending_ = std::move(content);
    stream.close_sink_if_done();
    return stream;
}

Stream Stream::captured(sys::UniqueFd from, Transcript& transcript, Transcript::Channel channel,
                        OutputBudget& budget) {
    Stream stream(std::move(from), sys::UniqueFd{}, 0, &budget);
    stream.transcript_ = &transcript;
    stream.channel_ = channel;
    return stream;
}

void Stream::deliver(std::string_view bytes) {
    if (transcript_ != nullptr)
        transcript_->append(channel_, bytes);
    else
        pending_.append(bytes);
}

void Stream::admit(const char* data, std::size_t n) {
    if (budget_ == nullptr) {
        pending_.append(data, n);
        return;
    }
    std::size_t head = static_cast<std::size_t>(std::min<std::uint64_t>(n, budget_->head_left));
    deliver({data, head});
    budget_->head_left -= head;
    if (head < n) tail_.push(data + head, n - head);
}

void Stream::on_readable() {
    char chunk[kBuffer];
    ssize_t n = ::read(from_.get(), chunk, sizeof chunk - pending());
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
        from_.reset();
        if (budget_ != nullptr) deliver(tail_.drain());
        close_sink_if_done();
        return;
    }
    total_ += static_cast<std::uint64_t>(n);
    admit(chunk, static_cast<std::size_t>(n));
}

void Stream::on_writable() {
    std::size_t count = std::min(pending(), write_chunk_);
    ssize_t n = ::write(to_.get(), pending_.data() + offset_, count);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n < 0) {  // the reader went away (EPIPE): so does the writer, as in a pipeline
        on_sink_error();
        return;
    }
    offset_ += static_cast<std::size_t>(n);
    if (offset_ == pending_.size() || offset_ > kBuffer) {
        pending_.erase(0, offset_);
        offset_ = 0;
    }
    close_sink_if_done();
}

void Stream::on_sink_error() {
    to_.reset();
    from_.reset();
    pending_.clear();
    offset_ = 0;
}

// For the script's stdin: the script sees EOF once everything was delivered.
void Stream::close_sink_if_done() {
    if (!from_ && pending() == 0) to_.reset();
}

}  // namespace pysandbox
