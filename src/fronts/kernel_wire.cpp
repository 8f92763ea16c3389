#include "fronts/kernel_wire.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>

#include "fronts/requests.hpp"
#include "report/json_text.hpp"
#include "sys/errors.hpp"

namespace pysandbox::jupyter {
namespace {

using nlohmann::json;

constexpr std::string_view kDelimiter = "<IDS|MSG>";
constexpr std::size_t kRemembered = 4096;       // signatures kept to refuse a replay
constexpr std::size_t kSignatureSize = 2 * 32;  // HMAC-SHA256 in hex

std::string hex(const unsigned char* data, std::size_t size) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string text;
    text.reserve(size * 2);
    for (std::size_t i = 0; i < size; ++i) {
        text += kDigits[data[i] >> 4];
        text += kDigits[data[i] & 15];
    }
    return text;
}

int port_of(const json& file, const char* name, const std::string& path) {
    const auto it = file.find(name);
    if (it == file.end() || !it->is_number_integer() || it->get<long>() <= 0 ||
        it->get<long>() > 65535)
        throw UsageError("connection file " + path + ": \"" + name +
                         "\" must be a port number from 1 to 65535");
    return it->get<int>();
}

// The text nlohmann's dump(-1, ' ', false, replace) writes, in one pass (json_text.hpp): a
// stream message's text can be megabytes.
std::string dump(const json& value) {
    return dump_line(value);
}

}  // namespace

Connection read_connection_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw UsageError("cannot read the connection file " + path);
    std::stringstream text;
    text << in.rdbuf();
    const json file = json::parse(text.str(), nullptr, false);
    if (!file.is_object())
        throw UsageError("connection file " + path + " is not a JSON object (Jupyter writes it)");
    Connection c;
    const auto string_of = [&](const char* name, const char* fallback) {
        const auto it = file.find(name);
        if (it == file.end()) return std::string(fallback);
        if (!it->is_string())
            throw UsageError("connection file " + path + ": \"" + name + "\" must be a string");
        return it->get<std::string>();
    };
    if (const std::string transport = string_of("transport", "tcp"); transport != "tcp")
        throw UsageError("connection file " + path + ": transport \"" + transport +
                         "\" is not supported; use tcp");
    c.ip = string_of("ip", "127.0.0.1");
    if (c.ip == "localhost") c.ip = "127.0.0.1";  // some clients write it; libzmq binds literals
    if (c.ip.empty() || c.ip.find_first_of("/: ") != std::string::npos)
        throw UsageError("connection file " + path + ": \"ip\" must be an IPv4 address");
    if (const std::string scheme = string_of("signature_scheme", "hmac-sha256");
        scheme != "hmac-sha256")
        throw UsageError("connection file " + path + ": signature_scheme \"" + scheme +
                         "\" is not supported; use hmac-sha256");
    c.key = string_of("key", "");
    if (c.key.empty())
        throw UsageError("connection file " + path +
                         " has no key: pysandbox kernel checks every message's signature; let "
                         "the client write a key");
    c.shell_port = port_of(file, "shell_port", path);
    c.iopub_port = port_of(file, "iopub_port", path);
    c.stdin_port = port_of(file, "stdin_port", path);
    c.control_port = port_of(file, "control_port", path);
    c.hb_port = port_of(file, "hb_port", path);
    return c;
}

std::string message_type(const Message& message) {
    const auto it = message.header.find("msg_type");
    return it != message.header.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Frame by frame: a message's frames are not joined first (a megabyte of output is a megabyte
// frame, and a fresh copy of it would be paged in for nothing).
std::string Signer::sign(const std::vector<std::string_view>& frames) const {
    using Mac = std::unique_ptr<EVP_MAC, decltype(&::EVP_MAC_free)>;
    using MacContext = std::unique_ptr<EVP_MAC_CTX, decltype(&::EVP_MAC_CTX_free)>;
    const Mac mac(::EVP_MAC_fetch(nullptr, "HMAC", nullptr), &::EVP_MAC_free);
    const MacContext context(mac ? ::EVP_MAC_CTX_new(mac.get()) : nullptr, &::EVP_MAC_CTX_free);
    char digest_name[] = "SHA256";
    const OSSL_PARAM params[] = {
        ::OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
        ::OSSL_PARAM_construct_end()};
    bool ok = context &&
              ::EVP_MAC_init(context.get(), reinterpret_cast<const unsigned char*>(key_.data()),
                             key_.size(), params) == 1;
    for (std::string_view frame : frames)
        ok = ok &&
             ::EVP_MAC_update(context.get(), reinterpret_cast<const unsigned char*>(frame.data()),
                              frame.size()) == 1;
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    std::size_t size = 0;
    if (!ok || ::EVP_MAC_final(context.get(), digest.data(), &size, digest.size()) != 1)
        throw std::runtime_error("HMAC-SHA256 failed in libcrypto");
    return hex(digest.data(), size);
}

std::optional<Message> Signer::parse(const std::vector<std::string_view>& frames,
                                     std::string& why) {
    std::size_t delimiter = 0;
    while (delimiter < frames.size() && frames[delimiter] != kDelimiter) ++delimiter;
    if (delimiter + 6 > frames.size()) {
        why = "not a Jupyter message (no delimiter, or fewer than five frames after it)";
        return std::nullopt;
    }
    const std::string_view signature = frames[delimiter + 1];
    // A signature of another length is wrong whatever the frames: no HMAC over 16 MiB for it.
    if (signature.size() != kSignatureSize) {
        why = signature.empty() ? "unsigned" : "bad signature";
        return std::nullopt;
    }
    const std::string expected = sign({frames[delimiter + 2], frames[delimiter + 3],
                                       frames[delimiter + 4], frames[delimiter + 5]});
    if (CRYPTO_memcmp(signature.data(), expected.data(), expected.size()) != 0) {
        why = "bad signature";
        return std::nullopt;
    }
    if (seen_.contains(std::string(signature))) {
        why = "replayed (a signature seen before)";
        return std::nullopt;
    }
    // Within a request's bounds, as every front reads what a client sends: a signed frame nested
    // a million deep would otherwise parse, then overflow the stack when the header comes back
    // as a reply's parent.
    Message message;
    const std::array<json*, 4> parts = {&message.header, &message.parent, &message.metadata,
                                        &message.content};
    for (std::size_t i = 0; i < parts.size(); ++i) {
        BoundedJson parsed = parse_bounded(frames[delimiter + 2 + i], kRequestBounds);
        if (parsed.problem == BoundedJson::Problem::too_deep ||
            parsed.problem == BoundedJson::Problem::too_many) {
            why = "malformed (a frame that " + parsed.message + ")";
            return std::nullopt;
        }
        if (!parsed.value.is_object()) {
            why = "malformed (a frame that is not a JSON object)";
            return std::nullopt;
        }
        *parts[i] = std::move(parsed.value);
    }
    seen_.emplace(signature);
    recent_.emplace_back(signature);
    if (recent_.size() > kRemembered) {
        seen_.erase(recent_.front());
        recent_.pop_front();
    }
    for (std::size_t i = 0; i < delimiter; ++i) message.identities.emplace_back(frames[i]);
    return message;
}

std::vector<std::string> frames_of(const Signer& signer, const std::vector<std::string>& identities,
                                   const json& header, const json& parent, const json& content,
                                   const json& metadata) {
    return frames_with_content(signer, identities, header, parent, dump(content), metadata);
}

std::vector<std::string> frames_with_content(const Signer& signer,
                                             const std::vector<std::string>& identities,
                                             const json& header, const json& parent,
                                             std::string content, const json& metadata) {
    std::vector<std::string> frames = identities;
    std::string parts[4] = {dump(header), dump(parent), dump(metadata), std::move(content)};
    frames.emplace_back(kDelimiter);
    frames.push_back(signer.sign({parts[0], parts[1], parts[2], parts[3]}));
    for (std::string& part : parts) frames.push_back(std::move(part));
    return frames;
}

std::string random_id() {
    std::array<unsigned char, 16> bytes{};
    if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1)
        throw std::runtime_error("RAND_bytes failed in libcrypto");
    const std::string h = hex(bytes.data(), bytes.size());
    return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
           "-" + h.substr(20);
}

json make_header(const std::string& session, const std::string& msg_type) {
    const auto now = std::chrono::system_clock::now();
    const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
    const long micros = static_cast<long>(
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
        1000000);
    std::tm utc{};
    ::gmtime_r(&seconds, &utc);
    char date[40];
    const std::size_t n = std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &utc);
    std::snprintf(date + n, sizeof date - n, ".%06ldZ", micros);
    return {{"msg_id", random_id()}, {"session", session},   {"username", "pysandbox"},
            {"date", date},          {"msg_type", msg_type}, {"version", "5.3"}};
}

}  // namespace pysandbox::jupyter
