// Capped output: what the script wrote, cut to its head and tail, whatever sizes it arrived in,
// cell after cell, stdout and stderr sharing one head, captured or passed through.

#include <doctest/doctest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <thread>

#include "engine/stream.hpp"
#include "sys/unique_fd.hpp"
#include "sys/write_size.hpp"

using namespace pysandbox;

namespace {

// Bytes no two stretches of which look alike: a misplaced piece of the tail shows.
std::string numbered(std::size_t size) {
    std::string text;
    for (std::size_t i = 0; text.size() < size; ++i) text += std::to_string(i) + ',';
    text.resize(size);
    return text;
}

// What a stream with this head and tail keeps of `text`.
std::string kept(const std::string& text, std::uint64_t head, std::size_t tail) {
    if (text.size() <= head + tail) return text;
    return text.substr(0, head) + "\n[... " + std::to_string(text.size() - head - tail) +
           " bytes omitted ...]\n" + text.substr(text.size() - tail);
}

// Writes `text` in pieces of `piece` bytes into `fd` while `stream` reads, until all of it is in.
void feed(Stream& stream, int fd, const std::string& text, std::size_t piece) {
    std::thread writer([&text, fd, piece] {
        for (std::size_t at = 0; at < text.size(); at += piece)  // short writes: total() says
            if (::write(fd, text.data() + at, std::min(piece, text.size() - at)) <= 0) return;
    });
    const std::uint64_t want = stream.total() + text.size();
    while (stream.total() < want) stream.on_readable();
    writer.join();
}

// `text` written in pieces of `piece` bytes and read by a captured stream with an output limit
// of `limit` until its end; what the transcript kept of it.
std::string captured(const std::string& text, std::size_t piece, std::uint64_t limit) {
    auto [read_end, write_end] = sys::Pipe::create();
    OutputBudget budget = OutputBudget::for_limit(limit);
    Transcript transcript;
    Stream stream = Stream::captured(std::move(read_end), transcript, Transcript::kStdout, budget);
    feed(stream, write_end.get(), text, piece);
    write_end.reset();
    while (!stream.drained()) stream.on_readable();
    const Stream::Cut cut = stream.cut();
    CHECK(cut.total == text.size());
    CHECK(cut.omitted == text.size() - std::min<std::size_t>(text.size(), limit / 2 + limit / 4));
    return transcript.take(Transcript::kStdout);
}

}  // namespace

TEST_CASE("stream: past the head only the tail is kept, however the writes were cut") {
    constexpr std::uint64_t kLimit = 64 * 1024;  // a head of 32 KiB, a tail of 16 KiB
    const std::string text = numbered(1'000'003);
    for (std::size_t piece : {1000, 4096, 16 * 1024, 16 * 1024 + 1, 65536, 300'000}) {
        CAPTURE(piece);
        CHECK(captured(text, piece, kLimit) == kept(text, kLimit / 2, kLimit / 4));
    }
}

TEST_CASE("stream: output within the head, or just past it, is kept whole") {
    constexpr std::uint64_t kLimit = 64 * 1024;
    for (std::size_t size : {0, 100, 32 * 1024, 32 * 1024 + 16 * 1024, 32 * 1024 + 16 * 1024 + 1}) {
        CAPTURE(size);
        const std::string text = numbered(size);
        CHECK(captured(text, 5000, kLimit) == kept(text, kLimit / 2, kLimit / 4));
    }
}

TEST_CASE("stream: rings smaller than a read, down to one byte") {
    const std::string text = numbered(200'003);
    for (std::uint64_t limit : {4, 8, 12, 4000, 20'000, 300'000}) {
        for (std::size_t piece : {1, 3, 4096, 70'000}) {
            if (piece == 1 && limit > 4000) continue;  // a byte at a time: slow, and covered
            CAPTURE(limit);
            CAPTURE(piece);
            CHECK(captured(text, piece, limit) == kept(text, limit / 2, limit / 4));
        }
    }
}

TEST_CASE("stream: a session cuts each cell; the ring is drained and the counts start again") {
    constexpr std::uint64_t kLimit = 256 * 1024;  // a ring of 64 KiB: read into directly
    auto [read_end, write_end] = sys::Pipe::create();
    OutputBudget budget = OutputBudget::for_limit(kLimit);
    Transcript transcript;
    Stream stream = Stream::captured(std::move(read_end), transcript, Transcript::kStdout, budget);
    for (std::size_t cell = 0; cell < 4; ++cell) {
        CAPTURE(cell);
        const std::string text = numbered(cell % 2 ? 700'000 + cell : 150'000 + cell);
        feed(stream, write_end.get(), text, 4096 + cell * 777);
        const Stream::Cut cut = stream.cut();
        CHECK(cut.total == text.size());
        CHECK(cut.omitted == text.size() - std::min<std::size_t>(text.size(), kLimit * 3 / 4));
        CHECK(transcript.take(Transcript::kStdout) == kept(text, kLimit / 2, kLimit / 4));
        transcript.clear();
        budget = OutputBudget::for_limit(kLimit);  // as Sandbox::cut_output does
    }
}

TEST_CASE("stream: at a cell's end, read_available() takes what the pipe holds, any ring size") {
    // What is left in the pipe after it would be counted in the next cell.
    for (std::uint64_t limit : {4, 4096, 16 * 1024, 64 * 1024, 256 * 1024, 1 << 20}) {
        CAPTURE(limit);
        auto [read_end, write_end] = sys::Pipe::create();
        ::fcntl(write_end.get(), F_SETPIPE_SZ, 1 << 20);  // a script may grow its stdout pipe
        ::fcntl(read_end.get(), F_SETFL, O_NONBLOCK);
        OutputBudget budget = OutputBudget::for_limit(limit);
        Transcript transcript;
        Stream stream =
            Stream::captured(std::move(read_end), transcript, Transcript::kStdout, budget);
        const std::string first = numbered(limit);  // the head and the ring full
        feed(stream, write_end.get(), first, 4096);
        const std::string rest = numbered(1 << 20);
        const std::size_t in_pipe =
            static_cast<std::size_t>(::write(write_end.get(), rest.data(), rest.size()));
        stream.read_available();
        CHECK(stream.cut().total == first.size() + in_pipe);
    }
}

TEST_CASE("stream: stdout and stderr share the head; each keeps its own tail") {
    constexpr std::uint64_t kLimit = 64 * 1024;
    auto [out_read, out_write] = sys::Pipe::create();
    auto [err_read, err_write] = sys::Pipe::create();
    OutputBudget budget = OutputBudget::for_limit(kLimit);
    Transcript transcript;
    Stream out = Stream::captured(std::move(out_read), transcript, Transcript::kStdout, budget);
    Stream err = Stream::captured(std::move(err_read), transcript, Transcript::kStderr, budget);
    const std::string a = numbered(20'000), b = numbered(300'000), c = numbered(50'000);
    feed(out, out_write.get(), a, 5000);   // 20,000 of the 32 KiB head
    feed(err, err_write.get(), b, 65536);  // the rest of the head, then the tail
    feed(out, out_write.get(), c, 65536);  // all past the head
    out.cut();
    err.cut();
    CHECK(transcript.take(Transcript::kStdout) == a + kept(c, 0, kLimit / 4));
    CHECK(transcript.take(Transcript::kStderr) == kept(b, kLimit / 2 - a.size(), kLimit / 4));
}

namespace {

struct PassedThrough {
    std::uint64_t total;
    bool spliced;  // the stream still splicing at its end (it never fell back to copying)
};

// `text`, written in pieces of 7000 bytes by another thread, passed through a stream with an
// output limit of `limit` into `sink`, to the stream's end.
PassedThrough pass_through(const std::string& text, sys::UniqueFd sink, std::uint64_t limit) {
    auto [read_end, write_end] = sys::Pipe::create();
    OutputBudget budget = OutputBudget::for_limit(limit);
    const std::size_t chunk = sys::write_size_after_pollout(sink.get());
    Stream stream(std::move(read_end), std::move(sink), chunk, &budget);
    std::thread writer([&text, fd = std::move(write_end)] {
        for (std::size_t at = 0; at < text.size(); at += 7000)
            if (::write(fd.get(), text.data() + at,
                        std::min<std::size_t>(7000, text.size() - at)) <= 0)
                return;
    });
    while (!stream.drained()) {
        if (stream.wants_read()) stream.on_readable();
        if (stream.wants_write()) stream.on_writable();
    }
    writer.join();
    CHECK_FALSE(stream.sink_gone());
    return {stream.total(), stream.splicing()};
}

// Everything read from `fd` to its end (or EIO: a terminal's other side closed), in a thread.
class Drain {
  public:
    explicit Drain(int fd)
        : thread_([this, fd] {
              char chunk[65536];
              for (ssize_t n; (n = ::read(fd, chunk, sizeof chunk)) > 0;)
                  got_.append(chunk, static_cast<std::size_t>(n));
          }) {}
    std::string take() {
        thread_.join();
        return std::move(got_);
    }

  private:
    std::string got_;
    std::thread thread_;
};

// A scratch file in /tmp, already gone from the tree, holding `before`: opened for writing with
// `flags` at its end, and for reading.
struct ScratchFile {
    sys::UniqueFd write;
    sys::UniqueFd read;
};

ScratchFile scratch_file(const std::string& before, int flags) {
    char name[] = "/tmp/stream_test.XXXXXX";
    ScratchFile file{sys::UniqueFd(::mkstemp(name)), {}};
    REQUIRE(file.write);
    file.read.reset(::open(name, O_RDONLY | O_CLOEXEC));
    ::unlink(name);
    REQUIRE(file.read);
    REQUIRE(::write(file.write.get(), before.data(), before.size()) ==
            static_cast<ssize_t>(before.size()));
    if (flags != 0) REQUIRE(::fcntl(file.write.get(), F_SETFL, flags) == 0);
    return file;
}

std::string file_content(int fd) {
    std::string content;
    char chunk[65536];
    for (off_t at = 0;;) {
        const ssize_t n = ::pread(fd, chunk, sizeof chunk, at);
        if (n <= 0) return content;
        content.append(chunk, static_cast<std::size_t>(n));
        at += n;
    }
}

constexpr std::uint64_t kPassLimit = 256 * 1024;  // a head of 128 KiB, a tail of 64 KiB
const std::size_t kPassSizes[] = {100, 192 * 1024 + 1, 1'000'003};

}  // namespace

TEST_CASE("stream: passed through into a pipe, the head is spliced and the tail follows") {
    for (std::size_t size : kPassSizes) {
        CAPTURE(size);
        const std::string text = numbered(size);
        auto [sink_read, sink_write] = sys::Pipe::create();
        Drain reader(sink_read.get());
        const PassedThrough passed = pass_through(text, std::move(sink_write), kPassLimit);
        CHECK(passed.total == text.size());
        CHECK(passed.spliced);
        CHECK(reader.take() == kept(text, kPassLimit / 2, kPassLimit / 4));
    }
}

TEST_CASE("stream: passed through into a file, spliced at the file's position; appended, copied") {
    const std::string before = "written before\n";
    for (int flags : {0, O_APPEND}) {
        for (std::size_t size : kPassSizes) {
            CAPTURE(flags);
            CAPTURE(size);
            const std::string text = numbered(size);
            ScratchFile file = scratch_file(before, flags);
            const PassedThrough passed = pass_through(text, std::move(file.write), kPassLimit);
            CHECK(passed.total == text.size());
            // The kernel refuses to splice into a file opened O_APPEND (EINVAL): copied instead.
            CHECK(passed.spliced == (flags == 0));
            CHECK(file_content(file.read.get()) ==
                  before + kept(text, kPassLimit / 2, kPassLimit / 4));
        }
    }
}

TEST_CASE("stream: passed through into /dev/null, every byte is counted") {
    for (std::size_t size : kPassSizes) {
        CAPTURE(size);
        sys::UniqueFd null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
        REQUIRE(null);
        const PassedThrough passed = pass_through(numbered(size), std::move(null), kPassLimit);
        CHECK(passed.total == size);
        CHECK(passed.spliced);
    }
}

TEST_CASE("stream: passed through into a terminal, the bytes are copied, not spliced") {
    sys::UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    REQUIRE(master);
    REQUIRE(::grantpt(master.get()) == 0);
    REQUIRE(::unlockpt(master.get()) == 0);
    sys::UniqueFd terminal(::open(::ptsname(master.get()), O_WRONLY | O_NOCTTY | O_CLOEXEC));
    REQUIRE(terminal);
    termios raw{};
    REQUIRE(::tcgetattr(terminal.get(), &raw) == 0);
    ::cfmakeraw(&raw);  // no "\r" added to each "\n"
    REQUIRE(::tcsetattr(terminal.get(), TCSANOW, &raw) == 0);
    const std::string text = numbered(1'000'003);
    Drain reader(master.get());
    const PassedThrough passed = pass_through(text, std::move(terminal), kPassLimit);
    CHECK(passed.total == text.size());
    CHECK_FALSE(passed.spliced);
    CHECK(reader.take() == kept(text, kPassLimit / 2, kPassLimit / 4));
}

namespace {

// `text` through a LineRewrite in pieces of `piece` bytes, then flushed.
std::string rewritten(std::string_view text, std::size_t piece) {
    LineRewrite rewrite("  File \"/sandbox/x.py\", line ", "  File \"examples/x.py\", line ");
    std::string out;
    for (std::size_t at = 0; at < text.size(); at += piece)
        rewrite.feed(text.substr(at, piece), out);
    rewrite.flush(out);
    return out;
}

}  // namespace

TEST_CASE("stream: a traceback's script lines name the caller's path, however the reads cut them") {
    const std::string traceback =
        "Traceback (most recent call last):\n"
        "  File \"/sandbox/x.py\", line 3, in <module>\n    f()\n"
        "  File \"/usr/lib/python3.11/json/__init__.py\", line 346, in loads\n"
        "x  File \"/sandbox/x.py\", line 9\n"  // not at a line's start
        "  File \"/sandbox/x.pyc\", line 1\n"  // another file
        "  File \"/sandbox/x.py\", line 2\n"
        "  File \"/sandbox/x.py\"";  // cut short by the end: kept as it was
    const std::string expected =
        "Traceback (most recent call last):\n"
        "  File \"examples/x.py\", line 3, in <module>\n    f()\n"
        "  File \"/usr/lib/python3.11/json/__init__.py\", line 346, in loads\n"
        "x  File \"/sandbox/x.py\", line 9\n"
        "  File \"/sandbox/x.pyc\", line 1\n"
        "  File \"examples/x.py\", line 2\n"
        "  File \"/sandbox/x.py\"";
    for (std::size_t piece : {1, 2, 3, 7, 29, 30, 31, 64, 4096}) {
        CAPTURE(piece);
        CHECK(rewritten(traceback, piece) == expected);
    }
}

TEST_CASE("stream: at most kMaxLines lines are rewritten") {
    std::string many;
    for (std::size_t i = 0; i < LineRewrite::kMaxLines + 10; ++i)
        many += "  File \"/sandbox/x.py\", line 1\n";
    const std::string out = rewritten(many, 100);
    std::size_t changed = 0;
    for (std::size_t at = out.find("examples/x.py"); at != std::string::npos;
         at = out.find("examples/x.py", at + 1))
        ++changed;
    CHECK(changed == LineRewrite::kMaxLines);
    CHECK(out.ends_with("  File \"/sandbox/x.py\", line 1\n"));
}

TEST_CASE("a large capture is populated ahead by at most as much as it holds") {
    constexpr std::size_t kAhead = Transcript::kPopulateAhead;
    constexpr std::size_t kCapacity = 12 << 20;
    for (std::size_t size : {std::size_t{1}, std::size_t{300000}, std::size_t{1} << 20, kAhead - 1,
                             kAhead, kAhead + 1, std::size_t{10} << 20, kCapacity}) {
        const std::size_t upto = Transcript::populate_upto(size, kCapacity);
        CHECK(upto >= size);
        CHECK(upto <= kCapacity);
        CHECK(upto - size <= std::min(size, kAhead));
        CHECK((upto == kCapacity || upto - size == std::min(size, kAhead)));
    }
}
