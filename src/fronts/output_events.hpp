#pragma once
// A running cell's output as a front passes it on to its client while the cell runs (a session's
// "stream": true, an MCP call's progress notifications): the pieces the engine shows the cell's
// observer (OutputObserver, engine/stream.hpp), kept in arrival order until the front takes them,
// once a round of its poll loop. Nothing is held longer than that but the last bytes of a UTF-8
// character the read cut short (at most 3 a stream), which wait for the rest or for the end (and,
// after take_each, the memory of two emptied buffers).

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/stream.hpp"
#include "report/outcome.hpp"

namespace pysandbox {

class OutputEvents {
  public:
    using Channel = OutputSegment::Channel;
    struct Piece {
        Channel channel;
        std::string bytes;
        bool text;  // encoding::is_text: as the result, bytes that are not go as base64
    };

    OutputEvents() = default;
    OutputEvents(const OutputEvents&) = delete;
    OutputEvents& operator=(const OutputEvents&) = delete;

    // For Cell::on_output: adds each piece to this object, which must outlive the cell's run.
    OutputObserver observer() {
        return [this](Channel channel, std::string_view bytes) { add(channel, bytes); };
    }
    void add(Channel channel, std::string_view bytes);

    // The pieces since the last take, in order, adjacent ones of a stream together, each ending
    // with a whole character. `final` (the cell's result is there): the bytes held back too.
    std::vector<Piece> take(bool final = false);

    // The same pieces, each shown to `each` as a view into this object's own buffers, which keep
    // their memory for the next pieces (two of them, of at most kKeep bytes each): for a front
    // that copies each piece into a message of its own anyway (the kernel), so that a cell's
    // output is not paged into fresh buffers again for every message.
    using Each = std::function<void(Channel, std::string_view bytes, bool text)>;
    void take_each(bool final, const Each& each);
    static constexpr std::size_t kKeep = std::size_t{2} << 20;

    // The bytes waiting for take(), and when the first of them came (nullopt when none waits):
    // for a front that sends fewer, larger messages (the kernel).
    std::size_t pending_bytes() const { return pending_bytes_; }
    std::optional<std::chrono::steady_clock::time_point> pending_since() const {
        return pending_since_;
    }

  private:
    struct Raw {
        Channel channel;
        std::string bytes;
    };
    void settle(Raw& raw);
    void reset();

    std::vector<Raw> pending_;
    std::vector<std::string> spare_;  // emptied buffers that take_each kept
    std::string held_[2];             // the start of a character, cut short, for each stream
    std::size_t pending_bytes_ = 0;
    std::optional<std::chrono::steady_clock::time_point> pending_since_;
};

}  // namespace pysandbox
