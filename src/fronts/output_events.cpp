#include "fronts/output_events.hpp"

#include <utility>

#include "report/encoding.hpp"

namespace pysandbox {

void OutputEvents::add(Channel channel, std::string_view bytes) {
    if (!pending_since_) pending_since_ = std::chrono::steady_clock::now();
    pending_bytes_ += bytes.size();
    if (!pending_.empty() && pending_.back().channel == channel) {
        pending_.back().bytes.append(bytes);
        return;
    }
    std::string buffer;
    if (!spare_.empty()) {
        buffer = std::move(spare_.back());
        spare_.pop_back();
    }
    buffer.assign(bytes);
    pending_.push_back({channel, std::move(buffer)});
}

// The bytes held back before `raw`'s go first; its own last character, when cut short, is held
// back in turn.
void OutputEvents::settle(Raw& raw) {
    std::string& held = held_[raw.channel];
    if (!held.empty()) raw.bytes.insert(0, held);
    const std::size_t whole = encoding::whole_characters(raw.bytes);
    held.assign(raw.bytes, whole);
    raw.bytes.resize(whole);
}

void OutputEvents::reset() {
    pending_.clear();
    pending_bytes_ = 0;
    pending_since_.reset();
}

std::vector<OutputEvents::Piece> OutputEvents::take(bool final) {
    std::vector<Piece> pieces;
    auto emit = [&](Channel channel, std::string bytes) {
        if (bytes.empty()) return;
        const bool text = encoding::is_text(bytes);
        pieces.push_back({channel, std::move(bytes), text});
    };
    for (Raw& raw : pending_) {
        settle(raw);
        emit(raw.channel, std::move(raw.bytes));
    }
    reset();
    if (final)
        for (Channel channel : {OutputSegment::kStdout, OutputSegment::kStderr})
            emit(channel, std::exchange(held_[channel], {}));
    return pieces;
}

void OutputEvents::take_each(bool final, const Each& each) {
    auto show = [&](Channel channel, const std::string& bytes) {
        if (!bytes.empty()) each(channel, bytes, encoding::is_text(bytes));
    };
    for (Raw& raw : pending_) {
        settle(raw);
        show(raw.channel, raw.bytes);
        if (spare_.size() < 2 && raw.bytes.capacity() <= kKeep) {
            raw.bytes.clear();
            spare_.push_back(std::move(raw.bytes));
        }
    }
    reset();
    if (final)
        for (Channel channel : {OutputSegment::kStdout, OutputSegment::kStderr}) {
            show(channel, held_[channel]);
            held_[channel].clear();
        }
}

}  // namespace pysandbox
