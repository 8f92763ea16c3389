#include "pool.hpp"

#include <algorithm>
#include <exception>

namespace pysandbox {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kFirstBackoff{100};
constexpr std::chrono::milliseconds kLongestBackoff{60'000};

}  // namespace

Pool::Pool(const Plan& plan, sys::Poller& poller, std::size_t size)
    : plan_(plan), poller_(poller), size_(size) {
    refill();
}

std::unique_ptr<Session> Pool::take() {
    // The longest waiting first: the most likely to be ready.
    std::unique_ptr<Session> session;
    if (!waiting_.empty()) {
        session = std::move(waiting_.front());
        waiting_.pop_front();
    } else {
        session = std::make_unique<Session>(plan_, poller_);
    }
    // The next one starts in advance(), after this round: the taker's cell goes first.
    return session;
}

void Pool::advance() {
    for (auto& session : waiting_) session->advance();
    // A sandbox that ended while it waited (its start failed, or it was killed from outside) is
    // of no use to anyone.
    const auto failed = std::ranges::remove_if(waiting_, [](const auto& session) {
        return session->start_failure().has_value() || session->closed();
    });
    if (failed.begin() != failed.end()) {
        backoff_ = std::min(kLongestBackoff, std::max(kFirstBackoff, backoff_ * 2));
        next_start_ = Clock::now() + backoff_;
        waiting_.erase(failed.begin(), failed.end());
    } else if (std::ranges::any_of(waiting_, [](const auto& s) { return s->ready(); })) {
        backoff_ = std::chrono::milliseconds{0};
    }
    refill();
}

std::size_t Pool::ready() const {
    return static_cast<std::size_t>(
        std::ranges::count_if(waiting_, [](const auto& session) { return session->ready(); }));
}

void Pool::close() {
    closed_ = true;
    waiting_.clear();
}

void Pool::refill() {
    while (!closed_ && waiting_.size() < size_ && Clock::now() >= next_start_) {
        auto session = std::make_unique<Session>(plan_, poller_);
        try {
            session->start();
        } catch (const std::exception&) {
            // The host refused a sandbox (clone3, the id maps): a taker's own start says why.
            backoff_ = std::min(kLongestBackoff, std::max(kFirstBackoff, backoff_ * 2));
            next_start_ = Clock::now() + backoff_;
            return;
        }
        waiting_.push_back(std::move(session));
    }
}

}  // namespace pysandbox
