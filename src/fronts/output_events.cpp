#include "fronts/output_events.hpp"

#include <utility>

#include "report/encoding.hpp"

namespace pysandbox {

void OutputEvents::add(Channel channel, std::string_view bytes) {
    if (!pending_since_) pending_since_ = std::chrono::steady_clock::now();
    pending_bytes_ += bytes.size();
    if (!pending_.empty() && pending_.back().channel == channel)
        pending_.back().bytes.append(bytes);
    else
        pending_.push_back({channel, std::string(bytes)});
}

std::vector<OutputEvents::Piece> OutputEvents::take(bool final) {
    std::vector<Piece> pieces;
    auto emit = [&](Channel channel, std::string bytes) {
        if (bytes.empty()) return;
        const bool text = encoding::is_text(bytes);
        pieces.push_back({channel, std::move(bytes), text});
    };
    for (Raw& raw : pending_) {
        std::string bytes = std::move(held_[raw.channel]);
        held_[raw.channel].clear();
        if (bytes.empty())
            bytes = std::move(raw.bytes);
        else
            bytes += raw.bytes;
        const std::size_t whole = encoding::whole_characters(bytes);
        held_[raw.channel] = bytes.substr(whole);
        bytes.resize(whole);
        emit(raw.channel, std::move(bytes));
    }
    pending_.clear();
    pending_bytes_ = 0;
    pending_since_.reset();
    if (final)
        for (Channel channel : {OutputSegment::kStdout, OutputSegment::kStderr})
            emit(channel, std::exchange(held_[channel], {}));
    return pieces;
}

}  // namespace pysandbox
