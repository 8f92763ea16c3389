#pragma once
// JSON as pysandbox reads and writes it.
//
// Read: every JSON that comes from outside (a request line, a JSON-RPC message, a message from
// the cell driver) is parsed by parse_bounded, which first walks the text without building
// anything and refuses it at the first value past the bounds: a tree holds many times its
// text's size, and a deep one is copied, compared and destroyed by recursion.
//
// Written: one object on one line, whatever bytes it holds. Text the script controls may not be
// UTF-8; what is not is replaced (U+FFFD) rather than failing the dump.
//
// A result can carry a gigabyte of the script's output (--output-limit 1GiB), so strings are
// escaped here in one pass that copies runs of plain bytes sixteen at a time and replaces what is
// not UTF-8 on the way, and a line can be written out in pieces instead of built whole. The text
// is byte for byte what nlohmann's dump(-1, ' ', false, replace) writes (`"`, `\` and controls
// below U+0020 escaped, nothing else); only the speed differs (json_text_test.cpp, and the
// json_text fuzz target, compare the two).

#include <cstddef>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace pysandbox {

// How deep and how many: every value counts, an object's keys and the containers themselves too.
struct JsonBounds {
    std::size_t depth;
    std::size_t values;
};

struct BoundedJson {
    enum class Problem { none, invalid, too_deep, too_many };
    nlohmann::json value;  // null unless problem is none
    Problem problem = Problem::none;
    // What is wrong, to follow the name of what was read: "is nested deeper than 64 levels".
    std::string message;
};

// The text parsed, if it is JSON within `bounds`. It is read twice: once by nlohmann's SAX
// interface, counting and stopping at the first bound exceeded, then (if that passed) into a tree.
BoundedJson parse_bounded(std::string_view text, JsonBounds bounds);

// Serializes `value` compactly, handing the text to `emit` in pieces of about `piece` bytes.
void dump_line_pieces(const nlohmann::ordered_json& value,
                      const std::function<void(std::string_view)>& emit,
                      std::size_t piece = std::size_t{1} << 20);
// The same for nlohmann::json, whose objects come out in the order of their keys.
void dump_line_pieces(const nlohmann::json& value,
                      const std::function<void(std::string_view)>& emit,
                      std::size_t piece = std::size_t{1} << 20);

// The whole line in one string (no newline).
std::string dump_line(const nlohmann::ordered_json& value);
std::string dump_line(const nlohmann::json& value);

// `text` as a JSON string (quoted, escaped, what is not UTF-8 replaced) appended to `out`, as the
// dumps above write it: for a front that puts a large string into its JSON itself instead of
// copying it into a tree first.
void append_json_string(std::string& out, std::string_view text);

// The line and a newline written to `out`, flushed, without holding the whole line in memory.
// Should it fail after its first piece is out (it does not allocate after that, so only a
// number's own text could), the partial line is ended with a newline before the error goes on.
void write_line(const nlohmann::ordered_json& value, std::ostream& out);

}  // namespace pysandbox
