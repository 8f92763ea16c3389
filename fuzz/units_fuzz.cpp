// The unit parsers: any text is either a value or std::invalid_argument, and every value they
// return survives a round trip through its shortest spelling.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "plan/units.hpp"

namespace {

namespace units = pysandbox::units;

// The fuzzer only sees an abort: fail loudly on a broken round trip.
void require(bool condition) {
    if (!condition) std::abort();
}

void check_size(std::string_view text) {
    std::uint64_t bytes = 0;
    try {
        bytes = units::parse_size(text);
    } catch (const std::invalid_argument&) {
        return;
    }
    require(units::parse_size(units::format_size(bytes)) == bytes);
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
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    check_size(text);
    check_duration(text);
    return 0;
}
