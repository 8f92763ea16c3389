#pragma once
// The Jupyter messaging protocol's wire (5.3): the connection file a client writes, and messages
// as ZeroMQ frames [identities..., "<IDS|MSG>", signature, header, parent_header, metadata,
// content, buffers...], signed with HMAC-SHA256 (OpenSSL's libcrypto) over the four JSON frames.
// Only the kernel program (kernel_main.cpp) links it: libzmq has no usable static archive.

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

namespace pysandbox::jupyter {

// What a connection file says. Throws UsageError naming the file and what is wrong with it.
struct Connection {
    std::string ip;
    int shell_port = 0;
    int iopub_port = 0;
    int stdin_port = 0;
    int control_port = 0;
    int hb_port = 0;
    std::string key;  // never empty: an unsigned kernel is refused
    std::string endpoint(int port) const { return "tcp://" + ip + ":" + std::to_string(port); }
};
Connection read_connection_file(const std::string& path);

// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json's own destructor may allocate.
struct Message {
    std::vector<std::string> identities;  // the ROUTER's routing frames, for the reply
    nlohmann::json header;
    nlohmann::json parent;
    nlohmann::json metadata;
    nlohmann::json content;
};

// header.msg_type, or "" when missing.
std::string message_type(const Message& message);

// Signs and checks messages with one key; remembers recent signatures to refuse replays.
class Signer {
  public:
    explicit Signer(std::string key) : key_(std::move(key)) {}
    // The hex HMAC-SHA256 of the four frames.
    std::string sign(const std::vector<std::string_view>& frames) const;
    // The message in `frames` when its signature is right, new and its JSON an object each;
    // otherwise nothing and `why` says what was wrong.
    std::optional<Message> parse(const std::vector<std::string_view>& frames, std::string& why);

  private:
    std::string key_;
    std::deque<std::string> recent_;  // the last kRemembered signatures, oldest first
    std::unordered_set<std::string> seen_;
};

// The frames of a message (identities first), signed; every JSON text as UTF-8 with what is not
// replaced, so that no output can make it fail.
std::vector<std::string> frames_of(const Signer& signer, const std::vector<std::string>& identities,
                                   const nlohmann::json& header, const nlohmann::json& parent,
                                   const nlohmann::json& content,
                                   const nlohmann::json& metadata = nlohmann::json::object());
// The same with the content already JSON text, as frames_of would write it (json_text.hpp): a
// stream message's text goes into its frame once, not into a tree first.
std::vector<std::string> frames_with_content(const Signer& signer,
                                             const std::vector<std::string>& identities,
                                             const nlohmann::json& header,
                                             const nlohmann::json& parent, std::string content,
                                             const nlohmann::json& metadata);

// A new header: a random msg_id, this kernel's session, the time now.
nlohmann::json make_header(const std::string& session, const std::string& msg_type);
std::string random_id();

}  // namespace pysandbox::jupyter
