#pragma once
// Byte streams the supervisor copies without ever blocking: the caller's stdin to the script, the
// script's stdout and stderr to the caller. Output is capped: the first half of the output limit
// (all streams together, in arrival order) passes through; after that each stream keeps only its
// last bytes, delivered at its end after a "[... N bytes omitted ...]" marker. The supervisor's
// memory stays bounded whatever the script prints.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "report/encoding.hpp"
#include "report/outcome.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox {

// Sees each piece of captured output as the transcript takes it: the head of the output as it is
// read, and at a cut (a cell's end, the sandbox's) the tail after its "[... N bytes omitted ...]"
// marker. What it sees, in order, is what the result holds, and never more: bounded by the
// output limit. Called from the poll loop's round; it must not block, and not touch the sandbox.
using OutputObserver = std::function<void(OutputSegment::Channel, std::string_view)>;

// The head budget shared by every output stream.
struct OutputBudget {
    std::uint64_t head_left;
    std::size_t tail_capacity;  // per stream
    static OutputBudget for_limit(std::uint64_t limit) { return {limit / 2, limit / 4}; }
};

// Output kept in memory for the JSON result instead of being written out: each stream's bytes
// once, and the order they arrived in as segments (which stream, how many bytes) over them.
class Transcript {
  public:
    using Channel = OutputSegment::Channel;
    static constexpr Channel kStdout = OutputSegment::kStdout;
    static constexpr Channel kStderr = OutputSegment::kStderr;
    using Segment = OutputSegment;
    // Streams that alternate more often than this keep their bytes but not the order of the
    // rest: the last two segments then cover what is left of stdout, then of stderr.
    static constexpr std::size_t kMaxSegments = 4096;

    void append(Channel channel, std::string_view bytes);
    Transcript() = default;
    explicit Transcript(std::size_t expected) : expected_(expected) {}
    // At most how many bytes a channel will hold (the output budget's head and tail): once it
    // outgrows kGrowDirectly, room for that many is reserved at once. Untouched pages of the
    // reservation cost address space, not memory, and doubling a 100 MiB string would map,
    // fault in and copy about twice that.
    void expect(std::size_t bytes) { expected_ = bytes; }
    static constexpr std::size_t kGrowDirectly = 256 * 1024;
    // The arrival order (call before take()).
    std::vector<Segment> order() const;
    // Whether a channel's bytes are text (encoding::is_text), known without another pass: each
    // piece is checked as it arrives, while it is still in the cache. Call before take().
    bool is_text(Channel channel) const {
        return tally_[channel].text(text_[channel].size(), scanned_[channel]);
    }
    // Hands over one channel's bytes.
    std::string take(Channel channel) { return std::move(text_[channel]); }
    // Starts again, empty (a session's next cell).
    void clear() { *this = Transcript{expected_}; }

    // How far a channel holding `size` bytes is populated ahead (to at most `capacity`): as far
    // again as it holds, up to kPopulateAhead. A fixed stretch ahead would zero megabytes that a
    // cell printing one never writes (and a session's next cell pays for them again in its own
    // reservation); this way at most as much is populated unwritten as was written, and the
    // calls still come fewer as the output grows.
    static constexpr std::size_t kPopulateAhead = 4 << 20;
    static std::size_t populate_upto(std::size_t size, std::size_t capacity) {
        return std::min(capacity, size + std::min(size, kPopulateAhead));
    }

  private:
    std::string text_[2];
    std::size_t expected_ = 0;
    std::size_t populated_[2] = {0, 0};  // bytes of each reservation known to be backed
    encoding::TextTally tally_[2];
    std::size_t scanned_[2] = {0, 0};      // bytes the tally has passed
    std::vector<Segment> order_;           // adjacent segments of one channel merged
    std::uint64_t unordered_[2] = {0, 0};  // bytes past kMaxSegments
};

// The last `capacity` bytes of a stream, and how many fell out before them.
class TailRing {
  public:
    explicit TailRing(std::size_t capacity) : capacity_(capacity) {}
    void push(const char* data, std::size_t n);
    // Once the ring is full, the stream can be read straight into it: the two stretches, oldest
    // bytes first, that the next bytes overwrite (empty until then, and for a ring smaller than
    // `at_least`: a read into it would take less than a read does, and a cell's last reads are
    // counted). commit(n) says n bytes were put there. Output past the head takes one copy, from
    // the pipe into the ring, not two.
    struct Slots {
        char* first;
        std::size_t first_size;
        char* second;
        std::size_t second_size;
    };
    Slots slots(std::size_t at_least);
    void commit(std::size_t n);
    std::uint64_t omitted() const { return omitted_; }
    // Hands `sink` the marker (when something was omitted), then the kept bytes, oldest first, in
    // up to three pieces: a tail of megabytes is not copied into a string of its own first. The
    // ring is then empty and counts from zero; its memory stays for the next cell.
    template <class Sink>
    void drain(Sink&& sink) {
        if (omitted_ > 0) sink("\n[... " + std::to_string(omitted_) + " bytes omitted ...]\n");
        sink(std::string_view(ring_.data() + next_, ring_.size() - next_));
        sink(std::string_view(ring_.data(), next_));
        ring_.clear();
        next_ = 0;
        omitted_ = 0;
    }

  private:
    // A ring larger than this reserves its capacity at its first byte and is populated ahead as
    // it fills (Transcript's way): growing a vector of megabytes by doubling maps, faults in and
    // copies about twice its size, 4 KiB page by page.
    static constexpr std::size_t kReserveFrom = 256 * 1024;
    void fill(const char* data, std::size_t n);

    std::size_t capacity_;
    std::size_t populated_ = 0;  // bytes of the reservation known to be backed
    std::vector<char> ring_;
    std::size_t next_ = 0;  // where the next byte goes once the ring is full
    std::uint64_t omitted_ = 0;
};

// Swaps one exact prefix at the start of a line for another, as bytes pass: what `run` uses so
// that the script's traceback names the caller's path for it (`  File "examples/risky.py", line
// 4`), not its place inside (`  File "/sandbox/risky.py", line 4`). The script writes these
// bytes, so a line it prints itself with that prefix is rewritten the same way: harmless, as only
// the exact prefix is swapped. Bounded: a line split across reads keeps at most the prefix's
// length back until it is known, and at most kMaxLines lines are rewritten (the rest pass as they
// are), so the output grows by at most kMaxLines times the difference in length.
class LineRewrite {
  public:
    static constexpr std::size_t kMaxLines = 256;
    LineRewrite(std::string from, std::string to) : from_(std::move(from)), to_(std::move(to)) {}
    // `bytes`, rewritten, appended to `out`; a possible prefix at the end is held back.
    void feed(std::string_view bytes, std::string& out);
    // What is held back, as it was (the stream ended, or a cell did).
    void flush(std::string& out);

  private:
    std::string from_;
    std::string to_;
    std::string held_;  // the start of a line that may still become `from_` (shorter than it)
    bool line_start_ = true;
    std::size_t rewritten_ = 0;
};

class Stream {
  public:
    // `budget` is null for the script's stdin, which is not capped.
    Stream(sys::UniqueFd from, sys::UniqueFd to, std::size_t write_chunk,
           OutputBudget* budget = nullptr);
    // A stream whose whole content is known up front (the program given on stdin).
    static Stream preloaded(std::string content, sys::UniqueFd to);
    // An output stream kept in `transcript` rather than written to a file descriptor; what it
    // keeps is shown to `*observer` too when that is set (it may be set and reset later).
    static Stream captured(sys::UniqueFd from, Transcript& transcript, Transcript::Channel channel,
                           OutputBudget& budget, const OutputObserver* observer = nullptr);

    bool wants_read() const { return from_ && pending() < kBuffer && !sink_full_; }
    bool wants_write() const { return to_ && (pending() > 0 || sink_full_); }
    // The source is exhausted and everything read was delivered (or can never be).
    bool drained() const { return !from_ && (pending() == 0 || !to_); }
    int from_fd() const { return from_.get(); }
    int to_fd() const { return to_.get(); }
    std::uint64_t total() const { return total_; }
    std::uint64_t omitted() const { return omitted_ + tail_.omitted(); }
    // The sink refused more (EPIPE): for the script's stdout, the caller's reader went away.
    bool sink_gone() const { return sink_gone_; }
    // Whether the head still moves by splice(2), not through this process's memory (tests).
    bool splicing() const { return splice_; }

    void on_readable();
    // Reads what the source holds now, without waiting for more (a bounded number of reads).
    void read_available();
    // Ends the current part of the output (a session's cell): the tail kept so far is delivered
    // after its marker, and the counts start again from zero. Returns them as they were.
    struct Cut {
        std::uint64_t total = 0;
        std::uint64_t omitted = 0;
    };
    Cut cut();
    void on_writable();
    void on_sink_error();  // nothing more can be delivered
    // Rewrites the lines that start with `from` from now on (LineRewrite); no splicing then.
    void rewrite_lines(std::string from, std::string to);
    // Keeps a copy of the last `bytes` (at most) that pass through, as delivered: what `run`
    // reads the script's exception from when its stderr is not captured. No splicing then.
    void keep_last(std::size_t bytes);
    // What keep_last kept, oldest first; it then starts again, empty.
    std::string take_kept();

  private:
    static constexpr std::size_t kBuffer = 64 * 1024;

    std::size_t pending() const { return pending_.size() - offset_; }
    void admit(const char* data, std::size_t n);
    void deliver(std::string_view bytes);        // to the sink: pending_, or the transcript
    void deliver_as_is(std::string_view bytes);  // the same, past rewrite_
    void close_sink_if_done();
    bool splice_head();  // false: splicing is not possible here, copy instead
    void deliver_tail();
    enum class Read { data, again, end };
    Read read_once();

    sys::UniqueFd from_;
    sys::UniqueFd to_;
    std::size_t write_chunk_;
    OutputBudget* budget_;
    TailRing tail_;
    Transcript* transcript_ = nullptr;
    const OutputObserver* observer_ = nullptr;
    Transcript::Channel channel_ = Transcript::kStdout;
    std::string pending_;  // read, not yet written; bytes before offset_ are written
    std::size_t offset_ = 0;
    std::uint64_t total_ = 0;
    std::uint64_t omitted_ = 0;  // in tails already delivered since the last cut
    // Into a pipe, a file or /dev/null, the head of the output moves in the kernel (splice)
    // without a copy through this process; sink_full_ waits for the sink to drain. Cleared for
    // good when the kernel refuses (EINVAL: a file opened O_APPEND): the bytes are copied then.
    bool splice_ = false;
    bool sink_full_ = false;
    bool sink_gone_ = false;
    std::optional<LineRewrite> rewrite_;
    std::size_t keep_ = 0;  // keep_last's bound, or 0
    std::string kept_;      // up to twice keep_, trimmed to keep_ as it grows past that
};

}  // namespace pysandbox
