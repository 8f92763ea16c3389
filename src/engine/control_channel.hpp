#pragma once
// The channel between the supervisor and the cell driver inside the sandbox
// (src/python/pysandbox_driver.py): a SOCK_SEQPACKET socket pair whose other end the interpreter
// holds at kControlFd. A message is one JSON object, its text split into records of at most
// kControlRecord bytes, each starting with '+' (more follows) or '.' (the last one) and eight hex
// digits numbering it within its message.
//
// The driver shares its process with the script, so what arrives here is the script's word: a
// message over kMaxControlMessage bytes, one that is not a JSON object, or one shaped unlike any
// the driver sends (over kMaxControlValues values or kMaxControlDepth deep: such a tree parses
// into many times its size, in this process, outside the sandbox's limits) is dropped whole and
// counted; a descriptor sent along is closed unread. Whoever reads a message decides what to
// believe of it (engine/session.cpp checks each cell's token).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "sys/unique_fd.hpp"
#include "wire/fds.hpp"

namespace pysandbox {

// A flat object: a cell's figures are at most 32 strings, a preload failure is one per module.
inline constexpr std::size_t kMaxControlValues = 4096;
inline constexpr std::size_t kMaxControlDepth = 8;

class ControlChannel {
  public:
    // Throws SysError.
    ControlChannel();

    int fd() const { return own_.get(); }
    // The interpreter's end; the supervisor closes its copy once the child has one.
    int child_fd() const { return child_.get(); }
    void close_child_end() { child_.reset(); }

    // Queues a message; it goes out as the socket takes it (wants_write, on_writable).
    void send(const nlohmann::json& message);
    bool wants_write() const { return !outbox_.empty() && !closed_; }
    void on_writable();

    // Reads the records that are waiting (a bounded number per call).
    void on_readable();
    // The next complete message, oldest first.
    std::optional<nlohmann::json> receive();

    // The driver's end is gone (the interpreter exited or closed it).
    bool closed() const { return closed_; }
    // Messages dropped: too big, not a JSON object, or records that break the framing.
    std::uint64_t dropped() const { return dropped_; }

  private:
    void add_record(const char* data, std::size_t size);
    void lose_message();

    sys::UniqueFd own_;
    sys::UniqueFd child_;
    std::deque<std::string> outbox_;  // records, each sent with one send()
    std::deque<nlohmann::json> inbox_;
    std::string partial_;         // the message being received
    std::uint32_t expected_ = 0;  // the number of its next record
    bool discarding_ = false;     // the rest of a message that was lost
    std::string previous_;        // the last record taken, to recognise it sent again
    bool closed_ = false;
    std::uint64_t dropped_ = 0;
};

}  // namespace pysandbox
