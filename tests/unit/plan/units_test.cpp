// Human units for limits: what a profile or a flag may say, and what `profile show` prints back.

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "plan/units.hpp"

using namespace std::chrono_literals;
namespace units = pysandbox::units;

namespace {

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = kKiB * 1024;
constexpr std::uint64_t kGiB = kMiB * 1024;

std::string size_error(const std::string& text) {
    try {
        units::parse_size(text);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "(no error)";
}

std::string duration_error(const std::string& text) {
    try {
        units::parse_duration(text);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST_SUITE("units") {
    TEST_CASE("parse_size reads binary prefixes, and decimal prefixes as binary ones") {
        CHECK(units::parse_size("256MiB") == 256 * kMiB);
        CHECK(units::parse_size("1G") == kGiB);
        CHECK(units::parse_size("1GiB") == kGiB);
        CHECK(units::parse_size("1GB") == kGiB);
        CHECK(units::parse_size("512k") == 512 * kKiB);
        CHECK(units::parse_size("512K") == 512 * kKiB);
        CHECK(units::parse_size("512KiB") == 512 * kKiB);
        CHECK(units::parse_size("64M") == 64 * kMiB);
        CHECK(units::parse_size("2T") == 2 * kGiB * 1024);
        CHECK(units::parse_size("1.5GiB") == 1536 * kMiB);
        CHECK(units::parse_size("1.5k") == 1536);
    }

    TEST_CASE("parse_size takes a plain number as bytes") {
        CHECK(units::parse_size("4096") == 4096);
        CHECK(units::parse_size("4096B") == 4096);
        CHECK(units::parse_size("0") == 0);
        CHECK(units::parse_size(" 16 MiB ") == 16 * kMiB);
    }

    TEST_CASE("parse_size reads its units in any case, each with one meaning") {
        CHECK(units::parse_size("64mb") == 64 * kMiB);
        CHECK(units::parse_size("64MB") == 64 * kMiB);
        CHECK(units::parse_size("64m") == 64 * kMiB);
        CHECK(units::parse_size("64mib") == 64 * kMiB);
        CHECK(units::parse_size("64MIB") == 64 * kMiB);
        CHECK(units::parse_size("2gb") == 2 * kGiB);
        CHECK(units::parse_size("512kb") == 512 * kKiB);
        CHECK(units::parse_size("4096b") == 4096);
    }

    TEST_CASE("parse_size rejects what is not a size, saying what would do") {
        for (const char* bad :
             {"", "   ", "12 parsecs", "abc", "-1", "-1MiB", "1e3", "MiB", "1.2.3M",
              "256 MiB extra", "0x10", "1Mi", "inf", "nan", "NaN", "1MiB!", "5s"}) {
            CAPTURE(bad);
            CHECK_THROWS_AS(units::parse_size(bad), std::invalid_argument);
        }
        const std::string expected = "; expected e.g. 256MiB, 64mb, 1G, 512k or a number of bytes)";
        CHECK(size_error("12 parsecs") ==
              "invalid size \"12 parsecs\" (unknown unit \"parsecs\"" + expected);
        CHECK(size_error("") == "invalid size \"\" (empty" + expected);
        CHECK(size_error("-1") == "invalid size \"-1\" (negative" + expected);
        CHECK(size_error("nan") == "invalid size \"nan\" (not a number" + expected);
        CHECK(size_error("1MiB!") == "invalid size \"1MiB!\" (unknown unit \"mib!\"" + expected);
    }

    TEST_CASE("parse_size refuses sizes that do not fit in 63 bits") {
        CHECK(units::parse_size("4194303T") == 4194303ULL * 1024 * kGiB);
        CHECK(size_error("8388608T") ==
              "invalid size \"8388608T\" (too large; expected e.g. 256MiB, 64mb, 1G, 512k or a "
              "number of bytes)");
        CHECK_THROWS_AS(units::parse_size("99999999999999999999999"), std::invalid_argument);
    }

    TEST_CASE("parse_duration reads ms, s, m, min and h") {
        CHECK(units::parse_duration("5s") == 5000ms);
        CHECK(units::parse_duration("250ms") == 250ms);
        CHECK(units::parse_duration("2m") == 120'000ms);
        CHECK(units::parse_duration("2min") == 120'000ms);
        CHECK(units::parse_duration("1h") == 3'600'000ms);
        CHECK(units::parse_duration("1.5s") == 1500ms);
        CHECK(units::parse_duration("0.25s") == 250ms);
        CHECK(units::parse_duration("0s") == 0ms);
        CHECK(units::parse_duration(" 5 s ") == 5000ms);
    }

    TEST_CASE("parse_duration takes a bare number as seconds, as a request's timeout does") {
        CHECK(units::parse_duration("5") == 5000ms);
        CHECK(units::parse_duration("0.5") == 500ms);
        CHECK(units::parse_duration("90") == 90'000ms);
        CHECK(units::parse_duration("0") == 0ms);
        CHECK(units::parse_duration("1.5") == units::seconds(1.5));
    }

    TEST_CASE("parse_duration sums compound durations") {
        CHECK(units::parse_duration("1m30s") == 90'000ms);
        CHECK(units::parse_duration("1h2m3s") == 3'723'000ms);
        CHECK(units::parse_duration("2s500ms") == 2500ms);
        CHECK(units::parse_duration("1m 30s") == 90'000ms);
        CHECK(units::parse_duration("1.5m30s") == 120'000ms);
    }

    TEST_CASE("parse_duration rejects what is not a duration, saying what would do") {
        for (const char* bad : {"", "12 parsecs", "-1s", "-5", "1e3s", "abc", "s", "5sec", "5S",
                                "1.5.5s", "5s5", "PT5S", "nan", "inf", "1m30", "5s junk", "5 5"}) {
            CAPTURE(bad);
            CHECK_THROWS_AS(units::parse_duration(bad), std::invalid_argument);
        }
        const std::string expected = "; expected e.g. 5, 0.5, 250ms, 1.5s, 1m30s, 2h)";
        CHECK(duration_error("12 parsecs") ==
              "invalid duration \"12 parsecs\" (unknown unit \"parsecs\"" + expected);
        CHECK(duration_error("-1s") == "invalid duration \"-1s\" (negative" + expected);
        CHECK(duration_error("1e3s") == "invalid duration \"1e3s\" (unknown unit \"e\"" + expected);
        CHECK(duration_error("abc") == "invalid duration \"abc\" (not a number" + expected);
        CHECK(duration_error("nan") == "invalid duration \"nan\" (not a number" + expected);
        CHECK(duration_error("") == "invalid duration \"\" (empty" + expected);
        CHECK(duration_error("1m30") ==
              "invalid duration \"1m30\" (a unit is needed after each number" + expected);
        CHECK(duration_error("5!") == "invalid duration \"5!\" (trailing characters" + expected);
    }

    TEST_CASE("parse_duration refuses durations of 1e12 ms and more") {
        CHECK(units::parse_duration("277777h") == 277777 * 3'600'000ms);
        const std::string expected = "; expected e.g. 5, 0.5, 250ms, 1.5s, 1m30s, 2h)";
        CHECK(duration_error("277778h") == "invalid duration \"277778h\" (too large" + expected);
        CHECK(duration_error("1000000000") ==
              "invalid duration \"1000000000\" (too large" + expected);
        CHECK(duration_error("277777h60m") ==
              "invalid duration \"277777h60m\" (too large" + expected);
        // The bound holds for the rounded value (found by the units fuzzer).
        CHECK(units::parse_duration("999999999999.4ms") == 999'999'999'999ms);
        CHECK(duration_error("999999999999.9ms") ==
              "invalid duration \"999999999999.9ms\" (too large" + expected);
    }

    TEST_CASE("seconds checks a number of seconds as parse_duration does") {
        CHECK(units::seconds(2.5) == 2500ms);
        CHECK(units::seconds(0) == 0ms);
        CHECK_THROWS_AS(units::seconds(-1), std::invalid_argument);
        CHECK_THROWS_AS(units::seconds(std::numeric_limits<double>::quiet_NaN()),
                        std::invalid_argument);
        CHECK_THROWS_AS(units::seconds(std::numeric_limits<double>::infinity()),
                        std::invalid_argument);
        CHECK_THROWS_AS(units::seconds(1e12), std::invalid_argument);
    }

    TEST_CASE("format_size picks the largest exact binary unit") {
        CHECK(units::format_size(256 * kMiB) == "256MiB");
        CHECK(units::format_size(kGiB) == "1GiB");
        CHECK(units::format_size(1536 * kMiB) == "1536MiB");
        CHECK(units::format_size(512 * kKiB) == "512KiB");
        CHECK(units::format_size(1024 * kGiB) == "1TiB");
        CHECK(units::format_size(4096) == "4KiB");
        CHECK(units::format_size(1536) == "1536");
        CHECK(units::format_size(1000) == "1000");
        CHECK(units::format_size(0) == "0");
    }

    TEST_CASE("format_duration picks the largest exact unit") {
        CHECK(units::format_duration(5000ms) == "5s");
        CHECK(units::format_duration(250ms) == "250ms");
        CHECK(units::format_duration(120'000ms) == "2m");
        CHECK(units::format_duration(90'000ms) == "90s");
        CHECK(units::format_duration(1500ms) == "1500ms");
        CHECK(units::format_duration(3'600'000ms) == "60m");
        CHECK(units::format_duration(0ms) == "0ms");
    }

    TEST_CASE("format then parse gives the same number") {
        for (std::uint64_t bytes :
             {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{1000}, std::uint64_t{1536},
              4 * kKiB, 512 * kKiB, 64 * kMiB, 256 * kMiB, 1536 * kMiB, 3 * kGiB, 2048 * kGiB}) {
            CAPTURE(bytes);
            CHECK(units::parse_size(units::format_size(bytes)) == bytes);
        }
        for (auto ms : {0ms, 1ms, 250ms, 999ms, 1000ms, 1500ms, 5000ms, 59'999ms, 60'000ms,
                        90'000ms, 120'000ms, 3'600'000ms}) {
            CAPTURE(ms.count());
            CHECK(units::parse_duration(units::format_duration(ms)) == ms);
        }
    }

    TEST_CASE("parse then format gives the canonical spelling") {
        CHECK(units::format_size(units::parse_size("1G")) == "1GiB");
        CHECK(units::format_size(units::parse_size("512k")) == "512KiB");
        CHECK(units::format_size(units::parse_size("1.5GiB")) == "1536MiB");
        CHECK(units::format_size(units::parse_size("4096")) == "4KiB");
        CHECK(units::format_duration(units::parse_duration("1.5s")) == "1500ms");
        CHECK(units::format_duration(units::parse_duration("120s")) == "2m");
        CHECK(units::format_duration(units::parse_duration("0.5m")) == "30s");
    }
}
