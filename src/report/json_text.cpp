#include "report/json_text.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "report/encoding.hpp"
#include "sys/text_scan.hpp"

namespace pysandbox {
namespace {

using json = nlohmann::ordered_json;

constexpr bool is_continuation(char c) {
    return (static_cast<unsigned char>(c) & 0xc0) == 0x80;
}

// Whether the escaping of `text` is in its first state before text[at]: that byte is not a
// continuation byte (every sequence, well-formed or not, has ended), or the three before it are
// continuation bytes too (no sequence has more than three, so the one they finish, or the stray
// bytes they are, ended before it, and text[at] is a stray byte of its own).
bool safe_cut(std::string_view text, std::size_t at) {
    if (!is_continuation(text[at])) return true;
    return at >= 3 && is_continuation(text[at - 1]) && is_continuation(text[at - 2]) &&
           is_continuation(text[at - 3]);
}

// Whether the byte needs an escape in a JSON string.
constexpr bool needs_escape(unsigned char c) {
    return c < 0x20 || c == '"' || c == '\\';
}

void append_escape(std::string& out, unsigned char c) {
    switch (c) {
        case '"': out += "\\\""; return;
        case '\\': out += "\\\\"; return;
        case '\b': out += "\\b"; return;
        case '\f': out += "\\f"; return;
        case '\n': out += "\\n"; return;
        case '\r': out += "\\r"; return;
        case '\t': out += "\\t"; return;
        default: {
            static constexpr char kHex[] = "0123456789abcdef";
            const char escape[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
            out.append(escape, sizeof escape);
        }
    }
}

constexpr char kReplacement[] = "\xef\xbf\xbd";  // U+FFFD

// Escapes `text` onto `out` in one pass, runs of plain ASCII found a block at a time and appended
// whole. What is not UTF-8 is replaced as nlohmann's error_handler_t::replace replaces it: each
// maximal part of a sequence that cannot be completed becomes one U+FFFD, and the byte that cut it
// short is read again as the start of the next.
//
// With `direct` (a line written out in pieces), a long run of bytes that need no escape is not
// copied into `out` at all: what `out` holds goes first, then the run straight from `text`.
void append_escaped(std::string& out, std::string_view text,
                    const std::function<void(std::string_view)>* direct = nullptr) {
    constexpr std::size_t kDirectRun = 64 * 1024;
    const auto* const begin = reinterpret_cast<const unsigned char*>(text.data());
    const auto* const end = begin + text.size();
    const unsigned char* run = begin;  // where the current run of bytes copied as they are began
    const unsigned char* p = begin;
    const auto flush_run = [&out, &run, direct](const unsigned char* upto) {
        const std::string_view bytes(reinterpret_cast<const char*>(run),
                                     static_cast<std::size_t>(upto - run));
        if (direct == nullptr || bytes.size() < kDirectRun) {
            out.append(bytes);
            return;
        }
        if (!out.empty()) (*direct)(out);
        out.clear();
        (*direct)(bytes);
    };
    while (p < end) {
        if (end - p >= static_cast<long>(text_scan::kBlock) && text_scan::plain(p, '"', '\\')) {
            p += text_scan::kBlock;
            continue;
        }
        if (*p >= 0x80) {
            if (const int length = encoding::utf8_sequence(p, end); length > 0) {
                p += length;
                continue;
            } else {
                flush_run(p);
                out += kReplacement;
                p += length == 0 ? 1 : -length;
                run = p;
            }
        } else if (needs_escape(*p)) {
            flush_run(p);
            append_escape(out, *p);
            run = ++p;
        } else {
            ++p;
        }
    }
    flush_run(end);
}

// Room in `out` for a string of `size` bytes, its quotes and what usually follows it, at once:
// appended in runs, a long string would have its closing quote move it all to a buffer twice
// its size (a fresh one, to be paged in). Geometric, as append grows, so that many short
// strings cost no more than before.
void make_room(std::string& out, std::size_t size) {
    if (const std::size_t needed = out.size() + size + 64; needed > out.capacity())
        out.reserve(std::max(needed, 2 * out.capacity()));
}

// Serializes into `out`; with an `emit`, hands `out` over and starts it again every `piece`
// bytes or so, without one, keeps all of it there.
class Writer {
  public:
    Writer(std::string& out, const std::function<void(std::string_view)>* emit, std::size_t piece)
        : out_(out), emit_(emit), piece_(emit != nullptr ? piece : std::string::npos) {}

    // Json: nlohmann::ordered_json or nlohmann::json (whose objects come out in key order).
    template <class Json>
    void value(const Json& v) {
        switch (v.type()) {
            case Json::value_t::object: {
                out_ += '{';
                bool first = true;
                for (const auto& [key, member] : v.items()) {
                    if (!first) out_ += ',';
                    first = false;
                    string(key);
                    out_ += ':';
                    value(member);
                }
                out_ += '}';
                break;
            }
            case Json::value_t::array: {
                out_ += '[';
                bool first = true;
                for (const Json& element : v) {
                    if (!first) out_ += ',';
                    first = false;
                    value(element);
                }
                out_ += ']';
                break;
            }
            case Json::value_t::string: string(v.template get_ref<const std::string&>()); break;
            default: out_ += v.dump(-1, ' ', false, Json::error_handler_t::replace);
        }
        if (out_.size() >= piece_) flush();
    }

    void flush() {
        if (emit_ == nullptr) return;
        if (!out_.empty()) (*emit_)(out_);
        out_.clear();
    }

  private:
    // A long string goes out in pieces, each escaped on its own, so a piece may only end where
    // the escaping of the whole would be in its first state (safe_cut). Within any four bytes
    // there is such a place, so a piece is at most three bytes short of `piece_`.
    void string(std::string_view text) {
        if (emit_ == nullptr) make_room(out_, text.size());
        out_ += '"';
        while (text.size() > piece_) {
            std::size_t cut = piece_;
            while (cut > 0 && !safe_cut(text, cut)) --cut;
            if (cut == 0)  // pieces of fewer than four bytes (the tests'): forward instead
                for (cut = piece_; cut < text.size() && !safe_cut(text, cut);) ++cut;
            append_escaped(out_, text.substr(0, cut), emit_);
            text.remove_prefix(cut);
            flush();
        }
        append_escaped(out_, text, emit_);
        out_ += '"';
    }

    std::string& out_;
    const std::function<void(std::string_view)>* emit_;
    const std::size_t piece_;
};

// The first pass of parse_bounded: it allocates nothing but the lexer's text, and stops at the
// first value past either bound, before a tree of them is built.
class ShapeCheck {
  public:
    using json = nlohmann::json;
    using Problem = BoundedJson::Problem;
    explicit ShapeCheck(JsonBounds bounds) : bounds_(bounds) {}

    bool null() { return value(); }
    bool boolean(bool) { return value(); }
    bool number_integer(json::number_integer_t) { return value(); }
    bool number_unsigned(json::number_unsigned_t) { return value(); }
    bool number_float(json::number_float_t, const json::string_t&) { return value(); }
    bool string(json::string_t&) { return value(); }
    bool binary(json::binary_t&) { return value(); }
    bool start_object(std::size_t) { return open(); }
    bool key(json::string_t&) { return value(); }
    bool end_object() { return close(); }
    bool start_array(std::size_t) { return open(); }
    bool end_array() { return close(); }
    bool parse_error(std::size_t, const std::string&, const json::exception&) {
        problem_ = Problem::invalid;
        return false;
    }

    Problem problem() const { return problem_; }

  private:
    bool value() {
        if (++values_ <= bounds_.values) return true;
        problem_ = Problem::too_many;
        return false;
    }
    bool open() {
        if (!value()) return false;
        if (++depth_ <= bounds_.depth) return true;
        problem_ = Problem::too_deep;
        return false;
    }
    bool close() {
        --depth_;
        return true;
    }

    JsonBounds bounds_;
    Problem problem_ = Problem::none;
    std::size_t values_ = 0;
    std::size_t depth_ = 0;
};

template <class Json>
void dump_pieces(const Json& value, const std::function<void(std::string_view)>& emit,
                 std::size_t piece) {
    // Room for what the buffer can hold before it is handed over (up to a piece of text, then
    // a piece that escapes to six times its size: all control characters), so that the line does
    // not grow it, and so cannot fail there, once its first piece is out.
    std::string buffer;
    buffer.reserve(7 * piece + 64);
    Writer writer(buffer, &emit, piece == 0 ? 1 : piece);
    writer.value(value);
    writer.flush();
}

}  // namespace

BoundedJson parse_bounded(std::string_view text, JsonBounds bounds) {
    using Problem = BoundedJson::Problem;
    ShapeCheck shape(bounds);
    const bool whole = nlohmann::json::sax_parse(text, &shape);
    switch (whole ? Problem::none : shape.problem()) {
        case Problem::none: break;
        case Problem::invalid: return {nullptr, Problem::invalid, "is not valid JSON"};
        case Problem::too_deep:
            return {nullptr, Problem::too_deep,
                    "is nested deeper than " + std::to_string(bounds.depth) + " levels"};
        case Problem::too_many:
            return {nullptr, Problem::too_many,
                    "holds more than " + std::to_string(bounds.values) + " values"};
    }
    nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
    if (value.is_discarded()) return {nullptr, Problem::invalid, "is not valid JSON"};
    return {std::move(value), Problem::none, {}};
}

void dump_line_pieces(const json& value, const std::function<void(std::string_view)>& emit,
                      std::size_t piece) {
    dump_pieces(value, emit, piece);
}

void dump_line_pieces(const nlohmann::json& value,
                      const std::function<void(std::string_view)>& emit, std::size_t piece) {
    dump_pieces(value, emit, piece);
}

namespace {

template <class Json>
std::string dump_whole(const Json& value) {
    std::string line;
    Writer writer(line, nullptr, 0);
    writer.value(value);
    return line;
}

}  // namespace

std::string dump_line(const json& value) {
    return dump_whole(value);
}

void append_json_string(std::string& out, std::string_view text) {
    make_room(out, text.size());
    out += '"';
    append_escaped(out, text);
    out += '"';
}

std::string dump_line(const nlohmann::json& value) {
    return dump_whole(value);
}

void write_line(const json& value, std::ostream& out) {
    bool started = false;
    try {
        dump_line_pieces(value, [&out, &started](std::string_view text) {
            started = true;
            out.write(text.data(), static_cast<std::streamsize>(text.size()));
        });
    } catch (...) {
        // What was written cannot be taken back: the line is ended, so that whatever the caller
        // writes next (an error object) is a line of its own, and the broken one fails to parse.
        if (started) out << '\n' << std::flush;
        throw;
    }
    out << '\n' << std::flush;
}

}  // namespace pysandbox
