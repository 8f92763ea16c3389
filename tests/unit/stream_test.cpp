// Capped output: what the script wrote, cut to its head and tail, whatever sizes it arrived in.

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <string>
#include <thread>

#include "stream.hpp"
#include "sys/unique_fd.hpp"

using namespace pysandbox;

namespace {

// Bytes no two stretches of which look alike: a misplaced piece of the tail shows.
std::string numbered(std::size_t size) {
    std::string text;
    for (std::size_t i = 0; text.size() < size; ++i) text += std::to_string(i) + ',';
    text.resize(size);
    return text;
}

// `text` written into a pipe in pieces of `piece` bytes, read by a captured stream with an output
// limit of `limit` until its end; what the transcript kept of it.
std::string captured(const std::string& text, std::size_t piece, std::uint64_t limit) {
    auto [read_end, write_end] = sys::Pipe::create();
    OutputBudget budget = OutputBudget::for_limit(limit);
    Transcript transcript;
    Stream stream = Stream::captured(std::move(read_end), transcript, Transcript::kStdout, budget);
    std::thread writer([&text, piece, fd = std::move(write_end)] {
        for (std::size_t at = 0; at < text.size(); at += piece)  // short writes: total() says
            if (::write(fd.get(), text.data() + at, std::min(piece, text.size() - at)) <= 0) return;
    });
    while (!stream.drained()) stream.on_readable();
    writer.join();
    CHECK(stream.total() == text.size());
    return transcript.take(Transcript::kStdout);
}

}  // namespace

TEST_CASE("stream: past the head only the tail is kept, however the writes were cut") {
    constexpr std::uint64_t kLimit = 64 * 1024;  // a head of 32 KiB, a tail of 16 KiB
    const std::string text = numbered(1'000'003);
    const std::string expected = text.substr(0, kLimit / 2) + "\n[... " +
                                 std::to_string(text.size() - kLimit / 2 - kLimit / 4) +
                                 " bytes omitted ...]\n" + text.substr(text.size() - kLimit / 4);
    for (std::size_t piece : {1000, 4096, 16 * 1024, 16 * 1024 + 1, 65536, 300'000}) {
        CAPTURE(piece);
        CHECK(captured(text, piece, kLimit) == expected);
    }
}

TEST_CASE("stream: output within the head, or just past it, is kept whole") {
    constexpr std::uint64_t kLimit = 64 * 1024;
    for (std::size_t size : {0, 100, 32 * 1024, 32 * 1024 + 16 * 1024}) {
        CAPTURE(size);
        const std::string text = numbered(size);
        CHECK(captured(text, 5000, kLimit) == text);
    }
}
