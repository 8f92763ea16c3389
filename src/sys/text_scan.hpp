#pragma once
// The fast path of the scanners over the script's output (encoding.cpp, json_text.cpp): whether
// a block of kBlock bytes holds anything that needs a closer look, sixteen bytes at a time with
// SSE2 (every x86-64 has it), eight at a time with word arithmetic elsewhere.

#include <cstddef>
#include <cstdint>
#include <cstring>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace pysandbox::text_scan {

inline constexpr std::size_t kBlock = 16;

// Word arithmetic, eight bytes at a time: the fallback, always built so that the tests compare it
// with the SSE2 path. The bit tricks are exact for "any byte", which is all that is asked.
inline constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
inline constexpr std::uint64_t kHighs = 0x8080808080808080ULL;

constexpr std::uint64_t any_below(std::uint64_t word, std::uint8_t limit) {
    return (word - kOnes * limit) & ~word & kHighs;
}
constexpr std::uint64_t any_equal(std::uint64_t word, std::uint8_t value) {
    return any_below(word ^ (kOnes * value), 1);
}

inline bool plain_words(const unsigned char* p, char a, char b) {
    for (std::size_t half = 0; half < kBlock; half += 8) {
        std::uint64_t word;
        std::memcpy(&word, p + half, sizeof word);
        if (((word & kHighs) | any_below(word, 0x20) | any_equal(word, std::uint8_t(a)) |
             any_equal(word, std::uint8_t(b))) != 0)
            return false;
    }
    return true;
}

inline bool ascii_words(const unsigned char* p) {
    std::uint64_t words[2];
    std::memcpy(words, p, sizeof words);
    return ((words[0] | words[1]) & kHighs) == 0;
}

// No byte of the block is 0x80 or above, below 0x20, `a` or `b`.
inline bool plain(const unsigned char* p, char a, char b) {
#ifdef __SSE2__
    // A signed compare below 0x20 catches both ends at once: bytes from 0x80 up are negative.
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i special = _mm_or_si128(
        _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)),
        _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(a)), _mm_cmpeq_epi8(v, _mm_set1_epi8(b))));
    return _mm_movemask_epi8(special) == 0;
#else
    return plain_words(p, a, b);
#endif
}

// No byte of the block is 0x80 or above.
inline bool ascii(const unsigned char* p) {
#ifdef __SSE2__
    return _mm_movemask_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))) == 0;
#else
    return ascii_words(p);
#endif
}

}  // namespace pysandbox::text_scan
