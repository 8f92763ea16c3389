#pragma once
// SHA-256 (FIPS 180-4), for the artifacts' digests. Written here because the static build links
// only libseccomp and libcap; tests/unit/sha256_test.cpp checks it against the NIST vectors.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pysandbox {

class Sha256 {
  public:
    Sha256() noexcept;
    void update(const void* data, std::size_t size) noexcept;
    // The digest as 64 lowercase hex digits. Call once; the object is spent afterwards.
    std::string hex_digest() noexcept;

    static std::string of(std::string_view data) {
        Sha256 hash;
        hash.update(data.data(), data.size());
        return hash.hex_digest();
    }

  private:
    void compress(const std::uint8_t* block) noexcept;

    std::array<std::uint32_t, 8> state_;
    std::array<std::uint8_t, 64> buffer_{};
    std::size_t buffered_ = 0;
    std::uint64_t total_bytes_ = 0;
};

}  // namespace pysandbox
