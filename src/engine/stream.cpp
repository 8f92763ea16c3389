#include "engine/stream.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <new>

#include "sys/write_size.hpp"

namespace pysandbox {

namespace {

// A large capture fills its reservation 4 KiB page by 4 KiB page, a fault each. Populating the
// next stretch ahead in one call costs the same memory without the faults. Only a hint: a kernel
// without MADV_POPULATE_WRITE (before 5.14) says EINVAL and the pages fault in as before.
void populate(const char* from, std::size_t size) {
    constexpr std::uintptr_t kPage = 4096;
    const auto begin = reinterpret_cast<std::uintptr_t>(from) & ~(kPage - 1);
    const auto end = reinterpret_cast<std::uintptr_t>(from) + size;
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

// A reservation for a large output limit, backed by 2 MiB pages where the host allows it
// (transparent_hugepage "madvise" or "always"): one fault, one charge and one zeroing pass per
// 2 MiB instead of 512 of each. A hint, like populate(): ignored where it does not apply. Only
// from kHugeFrom: with THP's defrag set to "madvise", a fault there may compact memory first.
// That stall is risked for the default 16 MiB limit's 12 MiB too: on the 2-core VM, where the
// first touch of a fresh 4 KiB page costs 10 to 60 us (the hypervisor backs it), a --json run
// printing 100 MiB spent 110 ms of the supervisor's CPU with 4 KiB pages and 72 ms with 2 MiB
// ones (bench/README.md, output.py). Below it (a cell printing a little) the pages stay small.
constexpr std::size_t kHugeFrom = 8 << 20;

void prefer_huge_pages(const char* from, std::size_t size) {
    if (size < kHugeFrom) return;
    constexpr std::uintptr_t kHuge = 2 << 20;
    const auto begin = (reinterpret_cast<std::uintptr_t>(from) + kHuge - 1) & ~(kHuge - 1);
    const auto end = (reinterpret_cast<std::uintptr_t>(from) + size) & ~(kHuge - 1);
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

// Whether the head of the output may be spliced into `fd`, the caller's stdout or stderr: a pipe,
// a regular file or /dev/null, where splice(2) cannot block the supervisor longer than a write
// would (a pipe's side is non-blocking with SPLICE_F_NONBLOCK; a file's write does not wait for a
// reader). Not a terminal or a socket, whose splice would wait for the reader while the caller
// shares the descriptor's blocking mode. What the kernel refuses all the same (a file opened
// O_APPEND, a file system without splice) fails with EINVAL before a byte moves, and the bytes are
// then copied.
bool may_splice_to(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return false;
    return S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode) ||
           (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));  // /dev/null
}

}  // namespace

void Transcript::append(Channel channel, std::string_view bytes) {
    if (bytes.empty()) return;
    std::string& text = text_[channel];
    if (const std::size_t size = text.size() + bytes.size();
        size > text.capacity() && size > kGrowDirectly && expected_ > size) {
        try {
            text.reserve(expected_);
            prefer_huge_pages(text.data(), text.capacity());
        } catch (const std::bad_alloc&) {  // a host that refuses the address space: doubling
        }
    }
    if (const std::size_t size = text.size() + bytes.size();
        text.capacity() > kGrowDirectly && size > populated_[channel]) {
        const std::size_t upto = populate_upto(size, text.capacity());
        populate(text.data() + populated_[channel], upto - populated_[channel]);
        populated_[channel] = upto;
    }
    text.append(bytes);
    scanned_[channel] = tally_[channel].add(text, scanned_[channel]);
    if (!order_.empty() && order_.back().channel == channel && unordered_[0] + unordered_[1] == 0)
        order_.back().length += bytes.size();
    else if (order_.size() < kMaxSegments)
        order_.push_back({channel, bytes.size()});
    else
        unordered_[channel] += bytes.size();
}

std::vector<Transcript::Segment> Transcript::order() const {
    std::vector<Segment> order = order_;
    for (Channel channel : {kStdout, kStderr})
        if (unordered_[channel] > 0) order.push_back({channel, unordered_[channel]});
    return order;
}

void TailRing::fill(const char* data, std::size_t n) {
    if (capacity_ > kReserveFrom) {
        if (ring_.capacity() < capacity_) {
            try {
                ring_.reserve(capacity_);
                prefer_huge_pages(ring_.data(), ring_.capacity());
            } catch (const std::bad_alloc&) {  // a host that refuses the address space: doubling
            }
        }
        if (const std::size_t size = ring_.size() + n;
            ring_.capacity() >= capacity_ && size > populated_) {
            const std::size_t upto = Transcript::populate_upto(size, capacity_);
            populate(ring_.data() + populated_, upto - populated_);
            populated_ = upto;
        }
    }
    ring_.insert(ring_.end(), data, data + n);
}

void TailRing::push(const char* data, std::size_t n) {
    if (n >= capacity_) {  // only the newest capacity_ bytes can survive
        omitted_ += ring_.size() + (n - capacity_);
        ring_.clear();
        fill(data + n - capacity_, capacity_);
        next_ = 0;
        return;
    }
    const std::size_t filled = std::min(n, capacity_ - ring_.size());
    fill(data, filled);
    data += filled;
    n -= filled;
    while (n > 0) {  // full: overwrite the oldest bytes, which start at next_
        const std::size_t count = std::min(n, capacity_ - next_);
        std::memcpy(ring_.data() + next_, data, count);
        next_ = (next_ + count) % capacity_;
        omitted_ += count;
        data += count;
        n -= count;
    }
}

TailRing::Slots TailRing::slots(std::size_t at_least) {
    if (capacity_ == 0 || capacity_ < at_least || ring_.size() < capacity_)
        return {nullptr, 0, nullptr, 0};
    return {ring_.data() + next_, capacity_ - next_, ring_.data(), next_};
}

void TailRing::commit(std::size_t n) {
    assert(n <= capacity_ && ring_.size() == capacity_);
    next_ = (next_ + n) % capacity_;
    omitted_ += n;
}

Stream::Stream(sys::UniqueFd from, sys::UniqueFd to, std::size_t write_chunk, OutputBudget* budget)
    : from_(std::move(from)),
      to_(std::move(to)),
      write_chunk_(write_chunk),
      budget_(budget),
      tail_(budget ? budget->tail_capacity : 0) {
    splice_ = budget_ != nullptr && to_ && may_splice_to(to_.get());
    if (splice_) sys::grow_pipe(to_.get());
}

Stream Stream::preloaded(std::string content, sys::UniqueFd to) {
    Stream stream(sys::UniqueFd{}, std::move(to), PIPE_BUF);
    stream.pending_ = std::move(content);
    stream.close_sink_if_done();
    return stream;
}

Stream Stream::captured(sys::UniqueFd from, Transcript& transcript, Transcript::Channel channel,
                        OutputBudget& budget, const OutputObserver* observer) {
    Stream stream(std::move(from), sys::UniqueFd{}, 0, &budget);
    // The head, then the tail and the line saying what was omitted between them (cut()).
    transcript.expect(static_cast<std::size_t>(budget.head_left) + budget.tail_capacity + 64);
    stream.transcript_ = &transcript;
    stream.observer_ = observer;
    stream.channel_ = channel;
    return stream;
}

void LineRewrite::feed(std::string_view bytes, std::string& out) {
    std::size_t at = 0;
    while (at < bytes.size()) {
        if (line_start_ && rewritten_ < kMaxLines) {
            // A byte at a time while the line's start matches `from_` (at most its length).
            if (bytes[at] == from_[held_.size()]) {
                held_ += bytes[at++];
                if (held_.size() == from_.size()) {
                    out.append(to_);
                    ++rewritten_;
                    held_.clear();
                    line_start_ = false;
                }
                continue;
            }
            out.append(held_);  // not the prefix: the line as it was, from this byte on
            held_.clear();
            line_start_ = false;
        }
        const std::size_t newline = bytes.find('\n', at);
        const std::size_t end = newline == std::string_view::npos ? bytes.size() : newline + 1;
        out.append(bytes.substr(at, end - at));
        at = end;
        line_start_ = newline != std::string_view::npos;
    }
}

void LineRewrite::flush(std::string& out) {
    out.append(held_);
    held_.clear();
    line_start_ = true;
}

void Stream::rewrite_lines(std::string from, std::string to) {
    rewrite_.emplace(std::move(from), std::move(to));
    splice_ = false;
}

void Stream::keep_last(std::size_t bytes) {
    keep_ = bytes;
    splice_ = false;
}

std::string Stream::take_kept() {
    if (kept_.size() > keep_) kept_.erase(0, kept_.size() - keep_);
    return std::exchange(kept_, {});
}

void Stream::deliver(std::string_view bytes) {
    if (rewrite_) {
        std::string rewritten;
        rewrite_->feed(bytes, rewritten);
        deliver_as_is(rewritten);
        return;
    }
    deliver_as_is(bytes);
}

void Stream::deliver_as_is(std::string_view bytes) {
    if (transcript_ == nullptr) {
        pending_.append(bytes);
        if (keep_ > 0) {
            if (bytes.size() >= keep_) kept_.clear();
            kept_.append(bytes.substr(bytes.size() - std::min(bytes.size(), keep_)));
            if (kept_.size() > 2 * keep_) kept_.erase(0, kept_.size() - keep_);
        }
        return;
    }
    transcript_->append(channel_, bytes);
    if (observer_ != nullptr && *observer_ && !bytes.empty()) (*observer_)(channel_, bytes);
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

bool Stream::splice_head() {
    constexpr std::size_t kMaxSplice = 1 << 20;
    const std::size_t count =
        static_cast<std::size_t>(std::min<std::uint64_t>(budget_->head_left, kMaxSplice));
    ssize_t n = ::splice(from_.get(), nullptr, to_.get(), nullptr, count,
                         SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    if (n > 0) {
        total_ += static_cast<std::uint64_t>(n);
        budget_->head_left -= static_cast<std::uint64_t>(n);
    } else if (n == 0) {
        from_.reset();
        close_sink_if_done();
    } else if (errno == EAGAIN) {
        sink_full_ = true;  // the source was readable, so it is the sink that is full
    } else if (errno == EPIPE) {
        on_sink_error();
    } else if (errno != EINTR) {
        return false;
    }
    return true;
}

void Stream::on_readable() {
    read_once();
}

Stream::Read Stream::read_once() {
    if (splice_ && pending() == 0 && budget_->head_left > 0) {
        const std::uint64_t before = total_;
        if (splice_head()) return total_ > before ? Read::data : from_ ? Read::again : Read::end;
        splice_ = false;
    }
    char chunk[kBuffer];
    // Past the head, with the tail's ring full: straight into the ring.
    const TailRing::Slots ring = budget_ != nullptr && budget_->head_left == 0
                                     ? tail_.slots(kBuffer)
                                     : TailRing::Slots{nullptr, 0, nullptr, 0};
    iovec parts[2] = {{chunk, sizeof chunk - pending()}, {nullptr, 0}};
    if (ring.first_size > 0) {
        parts[0] = {ring.first, ring.first_size};
        parts[1] = {ring.second, ring.second_size};
    }
    ssize_t n = ::readv(from_.get(), parts, parts[1].iov_len > 0 ? 2 : 1);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return Read::again;
    if (n <= 0) {
        from_.reset();
        if (budget_ != nullptr) deliver_tail();
        close_sink_if_done();
        return Read::end;
    }
    total_ += static_cast<std::uint64_t>(n);
    if (ring.first_size > 0)
        tail_.commit(static_cast<std::size_t>(n));
    else
        admit(chunk, static_cast<std::size_t>(n));
    return Read::data;
}

// Bounded: a script that keeps writing cannot hold the supervisor here; what it writes after the
// reads belongs to whatever comes next.
void Stream::read_available() {
    constexpr int kMaxReads = 64;
    for (int i = 0; i < kMaxReads && wants_read(); ++i)
        if (read_once() != Read::data) return;
}

void Stream::deliver_tail() {
    omitted_ += tail_.omitted();
    tail_.drain([this](std::string_view piece) { deliver(piece); });
    if (rewrite_) {  // the end of the stream or of a cell: what was held back, as it was
        std::string held;
        rewrite_->flush(held);
        deliver_as_is(held);
    }
}

Stream::Cut Stream::cut() {
    if (budget_ != nullptr) deliver_tail();
    const Cut cut{total_, omitted_};
    total_ = 0;
    omitted_ = 0;
    return cut;
}

void Stream::on_writable() {
    if (sink_full_) {  // room again: the next readable source is spliced
        sink_full_ = false;
        return;
    }
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
    sink_gone_ = true;
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
