// The fast JSON writer against nlohmann's own dump: the same text for every input, in one piece
// or many.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <sstream>
#include <string>

#include "engine/stream.hpp"
#include "report/encoding.hpp"
#include "report/json_text.hpp"
#include "sys/text_scan.hpp"

using json = nlohmann::ordered_json;
using pysandbox::dump_line;
using pysandbox::dump_line_pieces;

namespace {

std::string reference(const json& value) {
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string in_pieces(const json& value, std::size_t piece) {
    std::string text;
    dump_line_pieces(
        value, [&text](std::string_view part) { text.append(part); }, piece);
    return text;
}

void check_same(const std::string& bytes) {
    const json value = {{"stdout", bytes}, {"n", 3}, {"list", {bytes, nullptr, true, 1.5}}};
    const std::string expected = reference(value);
    CHECK(dump_line(value) == expected);
    CHECK(in_pieces(value, 1) == expected);
    CHECK(in_pieces(value, 7) == expected);
    CHECK(in_pieces(value, 4096) == expected);
}

}  // namespace

TEST_CASE("every single byte and every escape is written as nlohmann writes it") {
    for (int c = 0; c < 256; ++c) check_same(std::string(1, static_cast<char>(c)));
    check_same("");
    check_same("plain text, long enough to take the eight-byte path several times over");
    check_same("quote \" backslash \\ tab \t newline \n bell \a del \x7f end");
    check_same(std::string("nul \0 in the middle", 19));
}

TEST_CASE("UTF-8 passes through; what is not UTF-8 is replaced as nlohmann replaces it") {
    check_same("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf");
    check_same("overlong \xc0\xaf, surrogate \xed\xa0\x80, too high \xf4\x90\x80\x80");
    check_same("cut \xe2\x82");
    check_same("\xff\xfe lone bytes \x80");
}

TEST_CASE("random bytes, and random text around escapes, match at every piece size") {
    std::mt19937 random(15);
    const std::string alphabet =
        std::string("ab \"\\\n\t\x01\x1f\x7f", 11) + "\xc3\xa9\xe2\x82\xac";
    // Lead bytes and the edges of their second bytes' ranges: broken sequences of every kind.
    const std::string broken =
        "\x80\x8f\x90\x9f\xa0\xbf\xc1\xc2\xdf\xe0\xed\xef\xf0\xf4\xf5"
        "a";
    for (int round = 0; round < 900; ++round) {
        std::string bytes(random() % 200, '\0');
        for (char& c : bytes)
            c = round % 3 == 0   ? static_cast<char>(random())
                : round % 3 == 1 ? alphabet[random() % alphabet.size()]
                                 : broken[random() % broken.size()];
        check_same(bytes);
    }
}

TEST_CASE("a long string split across pieces keeps its multi-byte characters whole") {
    std::string text;
    for (int i = 0; i < 100000; ++i) text += i % 97 == 0 ? "\xe2\x82\xac\n\"" : "x";
    check_same(text);
}

TEST_CASE("a long run of stray continuation bytes still goes out in pieces of the asked size") {
    // Not UTF-8, so never a stream's text (that is base64), but an exception's message is the
    // script's stderr as it was: a piece must not grow to the whole run.
    const json value = {{"message", std::string(100000, '\x80')}};
    std::size_t largest = 0;
    std::string text;
    dump_line_pieces(
        value,
        [&](std::string_view part) {
            largest = std::max(largest, part.size());
            text.append(part);
        },
        4096);
    CHECK(text == reference(value));
    CHECK(largest <= 3 * 4096 + 64);  // each stray byte is one U+FFFD, three bytes
}

TEST_CASE("long plain runs go out straight from the string, in order with what surrounds them") {
    std::string text = "start \"" + std::string(200000, 'x') + "\n\t\xc3\xa9" +
                       std::string(70000, 'y') + "\x01" + std::string(65535, 'z') + "\"";
    const json value = {{"a", 1}, {"stdout", text}, {"b", text.substr(0, 100)}};
    for (std::size_t piece : {std::size_t{4096}, std::size_t{100000}, std::size_t{1} << 20})
        CHECK(in_pieces(value, piece) == reference(value));
}

TEST_CASE("write_line ends the line and flushes it") {
    std::ostringstream out;
    pysandbox::write_line(json{{"a", "b\n"}}, out);
    CHECK(out.str() == "{\"a\":\"b\\n\"}\n");
}

TEST_CASE("is_text and is_utf8 on the word boundaries of the fast path") {
    using pysandbox::encoding::is_text;
    using pysandbox::encoding::is_utf8;
    CHECK(is_utf8(std::string(64, 'a')));
    CHECK(!is_utf8(std::string(15, 'a') + "\x80"));
    CHECK(is_utf8(std::string(7, 'a') + "\xc3\xa9" + std::string(7, 'b')));
    CHECK(!is_utf8(std::string(7, 'a') + "\xc3"));
    // One control character in ten is text, two are not, wherever they sit in a word.
    CHECK(is_text(std::string(9, 'a') + "\x01"));
    CHECK(!is_text(std::string(8, 'a') + "\x01\x02"));
    CHECK(is_text(std::string(80, '\n')));
    CHECK(!is_text(std::string(16, '\x7f')));
    CHECK(is_text(std::string(45, 'a') + std::string(5, '\x7f')));
    CHECK(!is_text(std::string(44, 'a') + std::string(6, '\x7f')));
    // The same across a block's boundary, and a sequence that straddles one.
    CHECK(is_utf8(std::string(15, 'a') + "\xe2\x82\xac" + std::string(14, 'b')));
    CHECK(!is_utf8(std::string(31, 'a') + "\xe2\x82"));
    CHECK(is_text(std::string(15, 'a') + "\x01" + std::string(16, 'b')));
    CHECK(!is_text(std::string(14, 'a') + "\x01\x02" + std::string(3, 'b')));
}

TEST_CASE("the vector and word paths of the block scan agree on every byte at every place") {
    namespace scan = pysandbox::text_scan;
    unsigned char block[scan::kBlock];
    for (std::size_t place = 0; place < scan::kBlock; ++place)
        for (int c = 0; c < 256; ++c) {
            std::memset(block, 'x', sizeof block);
            block[place] = static_cast<unsigned char>(c);
            CHECK(scan::plain(block, '"', '\\') == scan::plain_words(block, '"', '\\'));
            CHECK(scan::plain(block, 0x7f, 0x7f) == scan::plain_words(block, 0x7f, 0x7f));
            CHECK(scan::ascii(block) == scan::ascii_words(block));
            CHECK(scan::ascii(block) == (c < 0x80));
        }
}

TEST_CASE("a transcript knows whether a channel is text as is_text says, however it arrived") {
    std::mt19937 random(17);
    const std::string alphabet = std::string("ab\n\x01\x7f", 5) +
                                 "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" +
                                 "\x80\xbf\xc2\xe0\xed\xf4";
    for (int round = 0; round < 2000; ++round) {
        std::string bytes(random() % 120, '\0');
        for (char& c : bytes)
            c = round % 4 == 0 ? static_cast<char>(random()) : alphabet[random() % alphabet.size()];
        pysandbox::Transcript transcript;
        for (std::size_t at = 0; at < bytes.size();) {
            const std::size_t n = std::min<std::size_t>(1 + random() % 9, bytes.size() - at);
            transcript.append(pysandbox::Transcript::kStdout,
                              std::string_view(bytes).substr(at, n));
            at += n;
        }
        CHECK(transcript.is_text(pysandbox::Transcript::kStdout) ==
              pysandbox::encoding::is_text(bytes));
    }
}

TEST_SUITE("parse_bounded") {
    using pysandbox::BoundedJson;
    using pysandbox::JsonBounds;
    using pysandbox::parse_bounded;
    using Problem = BoundedJson::Problem;

    namespace {
    std::string nested(std::size_t depth, const std::string& inner = "1") {
        return std::string(depth, '[') + inner + std::string(depth, ']');
    }
    }  // namespace

    TEST_CASE("text within the bounds is parsed as nlohmann parses it") {
        const std::string text = R"({"id": [1, {"a": null}], "code": "x = 1", "f": 2.5})";
        // 3 levels ({ [ {) and 11 values (3 containers, 4 keys, 4 others): exactly the bounds.
        const BoundedJson parsed = parse_bounded(text, {.depth = 3, .values = 11});
        CHECK(parsed.problem == Problem::none);
        CHECK(parsed.message.empty());
        CHECK(parsed.value == nlohmann::json::parse(text));
        CHECK(parse_bounded(text, {.depth = 3, .values = 10}).problem == Problem::too_many);
        CHECK(parse_bounded(text, {.depth = 2, .values = 11}).problem == Problem::too_deep);
        CHECK(parse_bounded(nested(5), {.depth = 5, .values = 6}).problem == Problem::none);
    }

    TEST_CASE("one level or one value past a bound is refused, naming the bound") {
        const BoundedJson deep = parse_bounded(nested(6), {.depth = 5, .values = 100});
        CHECK(deep.problem == Problem::too_deep);
        CHECK(deep.value.is_null());
        CHECK(deep.message == "is nested deeper than 5 levels");
        const BoundedJson many = parse_bounded(nested(5), {.depth = 5, .values = 5});
        CHECK(many.problem == Problem::too_many);
        CHECK(many.message == "holds more than 5 values");
        // An object's keys count: {"a":1,"b":2} is 5 values.
        CHECK(parse_bounded(R"({"a":1,"b":2})", {.depth = 1, .values = 5}).problem ==
              Problem::none);
        CHECK(parse_bounded(R"({"a":1,"b":2})", {.depth = 1, .values = 4}).problem ==
              Problem::too_many);
    }

    TEST_CASE("what is not JSON is refused as such") {
        for (const char* text : {"", "nope", "{\"a\":", "[1,]", "1 2", "{\"a\":1}}"}) {
            const BoundedJson parsed = parse_bounded(text, {.depth = 8, .values = 8});
            CHECK(parsed.problem == Problem::invalid);
            CHECK(parsed.message == "is not valid JSON");
            CHECK(parsed.value.is_null());
        }
    }

    TEST_CASE("a hostile depth or count stops the first pass early, and no tree is built") {
        // 10^6 levels: a tree of them would be copied and dumped by recursion, and overflow
        // the stack; the first pass stops at the 65th.
        const BoundedJson deep = parse_bounded(nested(1000000), {.depth = 64, .values = 65536});
        CHECK(deep.problem == Problem::too_deep);
        // Deep and unfinished: refused for its depth before its end is seen.
        CHECK(parse_bounded(std::string(1000000, '['), {.depth = 64, .values = 65536}).problem ==
              Problem::too_deep);
        std::string wide = "[";
        for (int i = 0; i < 100000; ++i) wide += "0,";
        wide += "0]";
        CHECK(parse_bounded(wide, {.depth = 64, .values = 65536}).problem == Problem::too_many);
    }
}

TEST_CASE("nlohmann::json and a string on its own are written as nlohmann writes them") {
    const std::string bytes = "caf\xc3\xa9 \"quoted\" \x01 \xff cut \xe2\x82";
    const nlohmann::json plain = {{"text", bytes}, {"name", "stdout"}, {"n", {1, 2.5, nullptr}}};
    CHECK(pysandbox::dump_line(plain) ==
          plain.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    for (const std::string& text : {std::string(), bytes, std::string(300000, 'x') + bytes}) {
        std::string out = "{\"text\":";
        pysandbox::append_json_string(out, text);
        out += '}';
        CHECK(out == reference(json{{"text", text}}));
    }
}
