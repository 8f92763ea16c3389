// A running cell's output as the fronts pass it on (fronts/output_events.hpp): in order, adjacent
// pieces of a stream together, never a character in two, bytes that are not text said so.

#include <string>
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
