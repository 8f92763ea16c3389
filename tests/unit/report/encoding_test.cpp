// Bytes made fit for JSON (report/encoding.hpp): where a piece of output may end without cutting
// a UTF-8 character in two.

#include <string>

#include <doctest/doctest.h>

#include "report/encoding.hpp"

using namespace pysandbox;

TEST_CASE("whole_characters keeps back only the start of a character cut short") {
    CHECK(encoding::whole_characters("") == 0);
    CHECK(encoding::whole_characters("abc") == 3);
    const std::string e_acute = "\xc3\xa9";        // U+00E9, two bytes
    const std::string euro = "\xe2\x82\xac";       // U+20AC, three bytes
    const std::string emoji = "\xf0\x9f\x98\x80";  // U+1F600, four bytes
    for (const std::string& character : {e_acute, euro, emoji}) {
        const std::string text = "ab" + character;
        CHECK(encoding::whole_characters(text) == text.size());
        for (std::size_t cut = 1; cut < character.size(); ++cut)
            CHECK(encoding::whole_characters("ab" + character.substr(0, cut)) == 2);
    }
    // Not the start of a well-formed sequence: nothing is held back (it is not text anyway).
    CHECK(encoding::whole_characters("ab\xff") == 3);
    CHECK(encoding::whole_characters("ab\xc3\x41") == 4);
    CHECK(encoding::whole_characters("ab\xed\xa0") == 4);  // a surrogate's start
    CHECK(encoding::whole_characters("\x80\x80\x80") == 3);
}
