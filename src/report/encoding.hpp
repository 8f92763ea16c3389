#pragma once
// Bytes the script produced, made fit for a JSON string: text stays text, anything else (not
// UTF-8, or mostly control characters, which JSON would escape six bytes each) becomes base64.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace pysandbox::encoding {

// Whether `bytes` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most
// U+10FFFF).
bool is_utf8(std::string_view bytes);

// How far the bytes from p (a byte of 0x80 or more) form a well-formed UTF-8 sequence (Unicode
// table 3-7: no overlong forms, no surrogates, at most U+10FFFF): its length when they do; else,
// as a negative number, how many bytes fit before the first that does not (0 when *p starts no
// sequence). Bytes at `end` and past it do not fit.
int utf8_sequence(const unsigned char* p, const unsigned char* end);

// How much of `bytes` ends with a whole character: all of it, unless its last bytes (at most 3)
// begin a well-formed UTF-8 sequence that the end cuts short, which a next piece may complete.
std::size_t whole_characters(std::string_view bytes);

// is_text over bytes that arrive in pieces (a captured stream), each scanned once as it comes.
struct TextTally {
    std::size_t controls = 0;
    bool utf8 = true;
    // Scans bytes[from, ...) into the tally; returns where it stopped: the end, or the start of a
    // multi-byte sequence the end cuts short (scanned again from there when more has come).
    std::size_t add(std::string_view bytes, std::size_t from);
    // is_text of all `size` bytes, `scanned` of which add() has passed.
    bool text(std::size_t size, std::size_t scanned) const;
};

// UTF-8 with at most one control character (other than tab, newline and carriage return) in ten.
bool is_text(std::string_view bytes);

// RFC 4648 base64, with padding.
std::string base64(std::string_view bytes);

// The bytes of RFC 4648 base64 with padding (no white space); none when `text` is not that.
std::optional<std::string> decode_base64(std::string_view text);

// `bytes` bytes from the kernel's random source, as lowercase hex (tokens, ids). Throws SysError.
std::string random_hex(std::size_t bytes);

}  // namespace pysandbox::encoding
