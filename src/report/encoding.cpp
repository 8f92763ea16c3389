#include "report/encoding.hpp"

#include <openssl/evp.h>
#include <sys/random.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <vector>

#include "sys/errors.hpp"
#include "sys/text_scan.hpp"

namespace pysandbox::encoding {

namespace {

bool is_control(unsigned char c) {
    return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f;
}

}  // namespace

int utf8_sequence(const unsigned char* p, const unsigned char* end) {
    const unsigned char c = *p;
    int length;
    unsigned char low = 0x80, high = 0xbf;  // the range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
        length = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        length = 3;
        if (c == 0xe0) low = 0xa0;   // no overlong forms
        if (c == 0xed) high = 0x9f;  // no surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
        length = 4;
        if (c == 0xf0) low = 0x90;   // no overlong forms
        if (c == 0xf4) high = 0x8f;  // nothing above U+10FFFF
    } else {
        return 0;
    }
    for (int i = 1; i < length; ++i) {
        if (p + i >= end || p[i] < low || p[i] > high) return -i;
        low = 0x80;
        high = 0xbf;
    }
    return length;
}

std::size_t whole_characters(std::string_view bytes) {
    const auto* const begin = reinterpret_cast<const unsigned char*>(bytes.data());
    const auto* const end = begin + bytes.size();
    for (const auto* p = end; p > begin && end - p < 4;) {
        --p;
        if (*p < 0x80) break;  // ASCII: nothing after it begins a sequence
        if (*p >= 0xc0) {      // where a sequence would begin
            const int length = utf8_sequence(p, end);
            return length < 0 && p - length == end ? static_cast<std::size_t>(p - begin)
                                                   : bytes.size();
        }
    }
    return bytes.size();
}

// ASCII, the common case, is passed a block at a time.
bool is_utf8(std::string_view bytes) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const auto* end = p + bytes.size();
    while (p < end) {
        if (end - p >= static_cast<long>(text_scan::kBlock) && text_scan::ascii(p)) {
            p += text_scan::kBlock;
            continue;
        }
        if (*p < 0x80) {
            ++p;
            continue;
        }
        const int length = utf8_sequence(p, end);
        if (length <= 0) return false;
        p += length;
    }
    return true;
}

// One pass: blocks of plain ASCII (no high bit, no control character) are passed whole; the rest
// byte by byte, counting controls (tab, newline and carriage return, which text is full of, are
// not) and checking each multi-byte sequence.
std::size_t TextTally::add(std::string_view bytes, std::size_t from) {
    const auto* const begin = reinterpret_cast<const unsigned char*>(bytes.data());
    const auto* const end = begin + bytes.size();
    const auto* p = begin + from;
    while (utf8 && p < end) {
        if (end - p >= static_cast<long>(text_scan::kBlock) && text_scan::plain(p, 0x7f, 0x7f)) {
            p += text_scan::kBlock;
            continue;
        }
        if (*p >= 0x80) {
            const int length = utf8_sequence(p, end);
            if (length <= 0) {
                // Cut short by the end (more may come: scanned again from p), or not UTF-8.
                utf8 = length < 0 && p - length == end;
                break;
            }
            p += length;
            continue;
        }
        controls += is_control(*p) ? 1 : 0;
        ++p;
    }
    return static_cast<std::size_t>(p - begin);
}

bool TextTally::text(std::size_t size, std::size_t scanned) const {
    return utf8 && scanned == size && controls * 10 <= size;
}

bool is_text(std::string_view bytes) {
    TextTally tally;
    return tally.text(bytes.size(), tally.add(bytes, 0));
}

std::string base64(std::string_view bytes) {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    std::size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const std::uint32_t n = (p[i] << 16) | (p[i + 1] << 8) | p[i + 2];
        out += {kAlphabet[n >> 18], kAlphabet[(n >> 12) & 63], kAlphabet[(n >> 6) & 63],
                kAlphabet[n & 63]};
    }
    if (const std::size_t rest = bytes.size() - i; rest > 0) {
        const std::uint32_t n = (p[i] << 16) | (rest == 2 ? p[i + 1] << 8 : 0);
        out += {kAlphabet[n >> 18], kAlphabet[(n >> 12) & 63],
                rest == 2 ? kAlphabet[(n >> 6) & 63] : '=', '='};
    }
    return out;
}

std::optional<std::string> decode_base64(std::string_view text) {
    if (text.size() % 4 != 0 || text.size() > (1U << 30)) return std::nullopt;
    const std::size_t padding = text.ends_with("==") ? 2 : text.ends_with('=') ? 1 : 0;
    const bool alphabet = std::ranges::all_of(text.substr(0, text.size() - padding), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/';
    });
    if (!alphabet) return std::nullopt;
    std::string bytes(text.size() / 4 * 3, '\0');
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(bytes.data()),
                                  reinterpret_cast<const unsigned char*>(text.data()),
                                  static_cast<int>(text.size()));
    if (n < 0) return std::nullopt;
    bytes.resize(static_cast<std::size_t>(n) - padding);  // the block counts the padding
    return bytes;
}

std::string random_hex(std::size_t bytes) {
    std::vector<unsigned char> random(bytes);
    std::size_t got = 0;
    while (got < bytes) {
        const ssize_t n = ::getrandom(random.data() + got, bytes - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw SysError("getrandom", errno);
        got += static_cast<std::size_t>(n);
    }
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    hex.reserve(2 * bytes);
    for (unsigned char byte : random) {
        hex += kHex[byte >> 4];
        hex += kHex[byte & 15];
    }
    return hex;
}

}  // namespace pysandbox::encoding
