// The Jupyter wire as `pysandbox kernel` reads it (fronts/kernel_wire.cpp), from any bytes.
//
// The input's first byte picks what the rest is; its remaining bytes are split into frames at
// every 0x01 byte:
//   0: the frames as they came off the socket (no key known: framing and signature checks);
//   1: identities, then header, parent, metadata and content, to which the harness adds the
//      delimiter and the right signature, so that the JSON checks are reached. A message that
//      parses must be refused as a replay the second time, and must come back the same through
//      frames_of and a parse with another key (what the kernel sends is what a client reads);
//   2: a connection file: read, or refused with a UsageError (anything else escapes and fails).

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fronts/kernel_wire.hpp"
#include "sys/errors.hpp"

namespace {

using pysandbox::jupyter::Signer;

std::vector<std::string> split(std::string_view bytes) {
    std::vector<std::string> frames;
    std::size_t start = 0;
    for (std::size_t at = bytes.find('\x01'); at != std::string_view::npos;
         at = bytes.find('\x01', start)) {
        frames.emplace_back(bytes.substr(start, at - start));
        start = at + 1;
    }
    frames.emplace_back(bytes.substr(start));
    return frames;
}

// Signer::parse reads the frames where they lie, as the kernel reads ZeroMQ's.
std::vector<std::string_view> views(const std::vector<std::string>& frames) {
    return {frames.begin(), frames.end()};
}

void signed_message(std::vector<std::string> frames) {
    if (frames.size() < 4) return;
    Signer signer("fuzz-key");
    const auto body = frames.end() - 4;
    const std::string signature = signer.sign({*body, *(body + 1), *(body + 2), *(body + 3)});
    frames.insert(body, {"<IDS|MSG>", signature});
    std::string why;
    const auto message = signer.parse(views(frames), why);
    if (!message) {
        if (why.empty()) std::abort();
        return;
    }
    if (signer.parse(views(frames), why)) std::abort();  // a replay is refused

    Signer other("another-key");
    const std::vector<std::string> sent =
        pysandbox::jupyter::frames_of(other, message->identities, message->header, message->parent,
                                      message->content, message->metadata);
    const auto read = other.parse(views(sent), why);
    // Compared as text: a number past a double's range parses as infinity and is sent as null.
    const auto same = [](const nlohmann::json& a, const nlohmann::json& b) {
        return a.dump() == b.dump();
    };
    if (!read || !same(read->header, message->header) || !same(read->parent, message->parent) ||
        !same(read->metadata, message->metadata) || !same(read->content, message->content) ||
        read->identities != message->identities)
        std::abort();
}

void connection_file(std::string_view text) {
    const int fd = ::memfd_create("connection", MFD_CLOEXEC);
    if (fd < 0) return;
    if (::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size())) {
        try {
            const auto connection =
                pysandbox::jupyter::read_connection_file("/proc/self/fd/" + std::to_string(fd));
            if (connection.key.empty()) std::abort();  // an unsigned kernel is refused
        } catch (const pysandbox::UsageError&) {
        }
    }
    ::close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 3) {
        case 0: {
            Signer signer("fuzz-key");
            std::string why;
            // The fuzzer cannot compute an HMAC: nothing it makes passes.
            if (signer.parse(views(split(bytes)), why)) std::abort();
            break;
        }
        case 1: signed_message(split(bytes)); break;
        default: connection_file(bytes);
    }
    return 0;
}
