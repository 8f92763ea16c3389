// The unit parsers: any text is either a value or std::invalid_argument, every value they return
// survives a round trip through its shortest spelling, a size's units mean the same in any case,
// and a bare number of seconds is what the same number with "s" is.

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "plan/units.hpp"

namespace {

namespace units = pysandbox::units;

// The fuzzer only sees an abort: fail loudly on a broken round trip.
void require(bool condition) {
    if (!condition) std::abort();
}

template <typename Parse>
auto parsed(Parse parse, std::string_view text) -> std::optional<decltype(parse(text))> {
    try {
        return parse(text);
    } catch (const std::invalid_argument&) {
        return std::nullopt;
    }
}

std::string uppercase(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
}

bool is_plain_number(std::string_view text) {
    return !text.empty() && text.find_first_not_of("0123456789.") == std::string_view::npos;
}

void check_size(std::string_view text) {
    const auto parse = [](std::string_view t) { return units::parse_size(t); };
    const std::optional<std::uint64_t> bytes = parsed(parse, text);
    require(parsed(parse, uppercase(text)) == bytes);
    if (!bytes) return;
    require(units::parse_size(units::format_size(*bytes)) == *bytes);
}

void check_duration(std::string_view text) {
    std::chrono::milliseconds duration{};
    try {
        duration = units::parse_duration(text);
    } catch (const std::invalid_argument&) {
        return;
    }
    require(duration.count() >= 0);
    require(units::parse_duration(units::format_duration(duration)) == duration);
    if (is_plain_number(text)) require(units::parse_duration(std::string(text) + "s") == duration);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    check_size(text);
    check_duration(text);
    return 0;
}
