// SHA-256 against the NIST FIPS 180-4 example vectors (and the split-update path they don't cover).

#include <doctest/doctest.h>

#include <string>

#include "sys/sha256.hpp"

using pysandbox::Sha256;

TEST_CASE("sha256: NIST example vectors") {
    CHECK(Sha256::of("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(Sha256::of("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(Sha256::of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(
        Sha256::of("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnop"
                   "qklmnopqrlmnopqrsmnopqrstnopqrstu") ==
        "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    CHECK(Sha256::of(std::string(1'000'000, 'a')) ==
          "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256: feeding in pieces gives the digest of the whole") {
    const std::string text(1000, 'x');
    Sha256 hash;
    for (std::size_t at = 0; at < text.size(); at += 7)
        hash.update(text.data() + at, std::min<std::size_t>(7, text.size() - at));
    CHECK(hash.hex_digest() == Sha256::of(text));
}

TEST_CASE("sha256: lengths around the padding boundary") {
    // 55 bytes fit the length in one block, 56 need a second one, 64 fill a block exactly.
    CHECK(Sha256::of(std::string(55, 'a')) ==
          "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    CHECK(Sha256::of(std::string(56, 'a')) ==
          "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    CHECK(Sha256::of(std::string(64, 'a')) ==
          "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}
