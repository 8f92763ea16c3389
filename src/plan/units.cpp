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

// Splits "1.5GiB" into 1.5 and "GiB"; the number must be a plain non-negative decimal.
std::pair<double, std::string_view> split_number(std::string_view text) {
    text = trim(text);
    std::size_t end = 0;
    while (end < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.'))
        ++end;
    double value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + end, value);
    if (end == 0 || ec != std::errc{} || ptr != text.data() + end || !std::isfinite(value))
        throw std::invalid_argument("not a number");
    return {value, trim(text.substr(end))};
}

template <std::size_t N>
double factor_of(std::string_view suffix, const std::array<Unit, N>& table) {
    for (const auto& unit : table)
        if (unit.suffix == suffix) return unit.factor;
    throw std::invalid_argument("unknown unit");
}

constexpr double kKi = 1024.0;
constexpr double kMi = 1024.0 * kKi;
constexpr double kGi = 1024.0 * kMi;
constexpr double kTi = 1024.0 * kGi;
constexpr std::array<Unit, 17> kSizeUnits{{
    {"", 1},
    {"B", 1},
    {"k", kKi},
    {"K", kKi},
    {"KB", kKi},
    {"KiB", kKi},
    {"M", kMi},
    {"MB", kMi},
    {"MiB", kMi},
    {"m", kMi},
    {"G", kGi},
    {"GB", kGi},
    {"GiB", kGi},
    {"g", kGi},
    {"T", kTi},
    {"TB", kTi},
    {"TiB", kTi},
}};

constexpr std::array<Unit, 5> kDurationUnits{{
    {"ms", 1},
    {"s", 1000},
    {"m", 60'000},
    {"min", 60'000},
    {"h", 3'600'000},
}};

}  // namespace

std::uint64_t parse_size(std::string_view text) {
    try {
        auto [value, suffix] = split_number(text);
        double bytes = value * factor_of(suffix, kSizeUnits);
        if (bytes >= static_cast<double>(std::numeric_limits<std::int64_t>::max()))
            throw std::invalid_argument("too large");
        return static_cast<std::uint64_t>(bytes);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("invalid size \"" + std::string(text) + "\" (" + e.what() +
                                    "; expected e.g. 256MiB, 1G, 512k or a number of bytes)");
    }
}

std::chrono::milliseconds parse_duration(std::string_view text) {
    try {
        auto [value, suffix] = split_number(text);
        if (suffix.empty()) throw std::invalid_argument("missing unit");
        // Rounded before the bound is checked: 999999999999.9ms would otherwise pass and come
        // back as 1e12 ms, a value this function refuses.
        double ms = std::round(value * factor_of(suffix, kDurationUnits));
        if (ms >= 1e12) throw std::invalid_argument("too large");
        return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("invalid duration \"" + std::string(text) + "\" (" + e.what() +
                                    "; expected e.g. 5s, 250ms, 2m)");
    }
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
