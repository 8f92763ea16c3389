#include "sys/sha256.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <stdexcept>

namespace pysandbox {

void Sha256::Free::operator()(evp_md_ctx_st* ctx) const noexcept {
    EVP_MD_CTX_free(ctx);
}

namespace {

// Only the built-in default provider is needed: no openssl.cnf is read (a host's configuration
// could load provider modules, which a static binary cannot), and no time is spent on it.
bool init_without_config() {
    static const bool done = OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr) == 1;
    return done;
}

}  // namespace

Sha256::Sha256() : ctx_(init_without_config() ? EVP_MD_CTX_new() : nullptr) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1)
        throw std::runtime_error("libcrypto: cannot set up SHA-256");
}

void Sha256::update(const void* data, std::size_t size) noexcept {
    EVP_DigestUpdate(ctx_.get(), data, size);
}

std::string Sha256::hex_digest() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), digest, &length) != 1)
        throw std::runtime_error("libcrypto: SHA-256 failed");
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < length; ++i) {
        hex += kHex[digest[i] >> 4];
        hex += kHex[digest[i] & 15];
    }
    return hex;
}

}  // namespace pysandbox
