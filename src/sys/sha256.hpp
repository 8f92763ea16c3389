#pragma once
// SHA-256 of the artifacts and scripts, through OpenSSL's libcrypto (Debian's libssl-dev; linked
// statically like libseccomp and libcap). tests/unit/sys/sha256_test.cpp checks the NIST vectors.

#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace pysandbox {

class Sha256 {
  public:
    Sha256();  // throws std::runtime_error when libcrypto cannot set up the digest
    void update(const void* data, std::size_t size) noexcept;
    // The digest as 64 lowercase hex digits. Call once; the object is spent afterwards.
    std::string hex_digest();

    static std::string of(std::string_view data) {
        Sha256 hash;
        hash.update(data.data(), data.size());
        return hash.hex_digest();
    }

  private:
    struct Free {
        void operator()(evp_md_ctx_st* ctx) const noexcept;
    };
    std::unique_ptr<evp_md_ctx_st, Free> ctx_;
};

}  // namespace pysandbox
