// A running cell's output as the fronts pass it on (fronts/output_events.hpp): in order, adjacent
// pieces of a stream together, never a character in two, bytes that are not text said so.

#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "fronts/output_events.hpp"

using namespace pysandbox;

namespace {
constexpr auto kOut = OutputSegment::kStdout;
constexpr auto kErr = OutputSegment::kStderr;
}  // namespace

TEST_CASE("pieces come in order, a stream's adjacent ones together, and are taken once") {
    OutputEvents events;
    const OutputObserver observe = events.observer();
    observe(kOut, "a");
    observe(kOut, "b");
    observe(kErr, "E");
    observe(kOut, "c");
    const auto pieces = events.take();
    REQUIRE(pieces.size() == 3);
    CHECK((pieces[0].channel == kOut && pieces[0].bytes == "ab" && pieces[0].text));
    CHECK((pieces[1].channel == kErr && pieces[1].bytes == "E"));
    CHECK((pieces[2].channel == kOut && pieces[2].bytes == "c"));
    CHECK(events.take().empty());
}

TEST_CASE("a character cut short waits for its rest, or for the end") {
    OutputEvents events;
    events.add(kOut, "x\xc3");
    events.add(kErr, "e");
    auto pieces = events.take();
    REQUIRE(pieces.size() == 2);
    CHECK(pieces[0].bytes == "x");
    CHECK(pieces[1].bytes == "e");
    events.add(kOut, "\xa9!");
    pieces = events.take();
    REQUIRE(pieces.size() == 1);
    CHECK((pieces[0].bytes == "\xc3\xa9!" && pieces[0].text));
    events.add(kOut, "\xe2\x82");
    CHECK(events.take().empty());
    pieces = events.take(true);
    REQUIRE(pieces.size() == 1);
    CHECK((pieces[0].bytes == "\xe2\x82" && !pieces[0].text));
}

TEST_CASE("bytes that are not text are marked") {
    OutputEvents events;
    events.add(kOut, std::string("\xff\xfe\0", 3));
    const auto pieces = events.take(true);
    REQUIRE(pieces.size() == 1);
    CHECK_FALSE(pieces[0].text);
    CHECK(pieces[0].bytes == std::string("\xff\xfe\0", 3));
}

TEST_CASE("take_each shows what take would give, and keeps its buffers for the next pieces") {
    OutputEvents events;
    OutputEvents reference;
    struct Seen {
        OutputSegment::Channel channel;
        std::string bytes;
        bool text;
        const char* at;
    };
    std::vector<Seen> seen;
    const auto collect = [&seen](OutputSegment::Channel channel, std::string_view bytes,
                                 bool text) {
        seen.push_back({channel, std::string(bytes), text, bytes.data()});
    };
    const std::string big(100000, 'x');
    for (OutputEvents* each : {&events, &reference}) {
        each->add(kOut, big + "\xc3");
        each->add(kErr, "e\xff");
    }
    events.take_each(false, collect);
    auto pieces = reference.take();
    REQUIRE(seen.size() == pieces.size());
    for (std::size_t i = 0; i < seen.size(); ++i)
        CHECK((seen[i].channel == pieces[i].channel && seen[i].bytes == pieces[i].bytes &&
               seen[i].text == pieces[i].text));
    CHECK(events.pending_bytes() == 0);

    seen.clear();
    events.add(kOut, "\xa9" + big);
    events.take_each(true, collect);
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].bytes == "\xc3\xa9" + big);
    CHECK(seen[0].text);
    // Once a kept buffer is large enough, the next pieces are written where the last one was:
    // no fresh buffer to page in.
    seen.clear();
    events.add(kOut, big);
    events.take_each(true, collect);
    REQUIRE(seen.size() == 1);
    const char* again = seen[0].at;
    seen.clear();
    events.add(kOut, big);
    events.take_each(true, collect);
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].at == again);
    CHECK(events.take(true).empty());
}
