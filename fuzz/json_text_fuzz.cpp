// The fast JSON writer (json_text.cpp) against nlohmann's dump on any bytes: the same text, in
// one piece or in pieces of the size the input's first byte picks. And the bytes read as the
// control channel reads the driver's messages (parse_bounded, at its bounds): refused, or a tree
// within them that dumps as nlohmann dumps it (a deep one would overflow the stack there). The
// corpus's deep-* and many-* seeds are past the bounds.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "engine/control_channel.hpp"
#include "report/json_text.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using json = nlohmann::ordered_json;
    if (size == 0) return 0;
    const std::size_t piece = 1 + data[0] % 64;
    const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
    const json value = {{"text", bytes}, {bytes, {bytes, 1, nullptr}}};
    const std::string expected = value.dump(-1, ' ', false, json::error_handler_t::replace);
    if (pysandbox::dump_line(value) != expected) std::abort();
    std::string pieces;
    pysandbox::dump_line_pieces(
        value, [&pieces](std::string_view part) { pieces.append(part); }, piece);
    if (pieces != expected) std::abort();

    using pysandbox::BoundedJson;
    const BoundedJson parsed = pysandbox::parse_bounded(
        bytes, {pysandbox::kMaxControlDepth, pysandbox::kMaxControlValues});
    if (parsed.problem != BoundedJson::Problem::none) {
        if (!parsed.value.is_null() || parsed.message.empty()) std::abort();
        return 0;
    }
    const json tree(parsed.value);
    if (pysandbox::dump_line(tree) != tree.dump(-1, ' ', false, json::error_handler_t::replace))
        std::abort();
    return 0;
}
