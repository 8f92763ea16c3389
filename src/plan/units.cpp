#include "plan/units.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace pysandbox::units {
namespace {

struct Unit {
    std::string_view suffix;
    double factor;
};

std::string_view trim(std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
}

// Reads the plain non-negative decimal at the front of `text` ("1.5" of "1.5GiB") and removes it.
double take_number(std::string_view& text) {
    if (text.empty()) throw std::invalid_argument("empty");
    if (text.front() == '-') throw std::invalid_argument("negative");
    std::size_t end = 0;
    while (end < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.'))
        ++end;
    double value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + end, value);
    if (end == 0 || ec != std::errc{} || ptr != text.data() + end || !std::isfinite(value))
        throw std::invalid_argument("not a number");
    text.remove_prefix(end);
    return value;
}

// Removes and returns the letters at the front of `text` ("m" of "m30s").
std::string_view take_unit(std::string_view& text) {
    std::size_t end = 0;
    while (end < text.size() && std::isalpha(static_cast<unsigned char>(text[end]))) ++end;
    std::string_view unit = text.substr(0, end);
    text.remove_prefix(end);
    return unit;
}

std::string lowercase(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

template <std::size_t N>
double factor_of(std::string_view suffix, const std::array<Unit, N>& table) {
    for (const auto& unit : table)
        if (unit.suffix == suffix) return unit.factor;
    throw std::invalid_argument(suffix.empty() ? "trailing characters"
                                               : "unknown unit \"" + std::string(suffix) + "\"");
}

constexpr double kKi = 1024.0;
constexpr double kMi = 1024.0 * kKi;
constexpr double kGi = 1024.0 * kMi;
constexpr double kTi = 1024.0 * kGi;
// Compared lowercased: "64MB", "64mb", "64M" and "64MiB" are one size.
constexpr std::array<Unit, 14> kSizeUnits{{
    {"", 1},
    {"b", 1},
    {"k", kKi},
    {"kb", kKi},
    {"kib", kKi},
    {"m", kMi},
    {"mb", kMi},
    {"mib", kMi},
    {"g", kGi},
    {"gb", kGi},
    {"gib", kGi},
    {"t", kTi},
    {"tb", kTi},
    {"tib", kTi},
}};

constexpr std::array<Unit, 5> kDurationUnits{{
    {"ms", 1},
    {"s", 1000},
    {"m", 60'000},
    {"min", 60'000},
    {"h", 3'600'000},
}};

constexpr double kMaxMilliseconds = 1e12;

// Rounded before the bound is checked: 999999999999.9ms would otherwise pass and come back as
// 1e12 ms, a value this parser refuses.
std::chrono::milliseconds checked_milliseconds(double ms) {
    ms = std::round(ms);
    if (!(ms < kMaxMilliseconds)) throw std::invalid_argument("too large");
    return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

}  // namespace

std::uint64_t parse_size(std::string_view text) {
    try {
        std::string_view rest = trim(text);
        const double value = take_number(rest);
        const double bytes = value * factor_of(lowercase(trim(rest)), kSizeUnits);
        if (bytes >= static_cast<double>(std::numeric_limits<std::int64_t>::max()))
            throw std::invalid_argument("too large");
        return static_cast<std::uint64_t>(bytes);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("invalid size \"" + std::string(text) + "\" (" + e.what() +
                                    "; expected e.g. 256MiB, 64mb, 1G, 512k or a number of bytes)");
    }
}

std::chrono::milliseconds parse_duration(std::string_view text) {
    try {
        std::string_view rest = trim(text);
        const double first = take_number(rest);
        if (rest.empty()) return checked_milliseconds(first * 1000);  // a bare number: seconds
        rest = trim(rest);
        double ms = first * factor_of(take_unit(rest), kDurationUnits);
        while (!(rest = trim(rest)).empty()) {
            const double value = take_number(rest);
            rest = trim(rest);
            const std::string_view unit = take_unit(rest);
            if (unit.empty()) throw std::invalid_argument("a unit is needed after each number");
            ms += value * factor_of(unit, kDurationUnits);
        }
        return checked_milliseconds(ms);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("invalid duration \"" + std::string(text) + "\" (" + e.what() +
                                    "; expected e.g. 5, 0.5, 250ms, 1.5s, 1m30s, 2h)");
    }
}

std::chrono::milliseconds seconds(double value) {
    if (!std::isfinite(value)) throw std::invalid_argument("not a number");
    if (value < 0) throw std::invalid_argument("negative");
    return checked_milliseconds(value * 1000);
}

std::string format_size(std::uint64_t bytes) {
    constexpr std::array<std::pair<const char*, std::uint64_t>, 4> kSteps{{
        {"TiB", 1ULL << 40},
        {"GiB", 1ULL << 30},
        {"MiB", 1ULL << 20},
        {"KiB", 1ULL << 10},
    }};
    for (const auto& [suffix, factor] : kSteps)
        if (bytes != 0 && bytes % factor == 0) return std::to_string(bytes / factor) + suffix;
    return std::to_string(bytes);
}

std::string format_duration(std::chrono::milliseconds duration) {
    auto ms = duration.count();
    if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
    if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
    return std::to_string(ms) + "ms";
}

}  // namespace pysandbox::units
