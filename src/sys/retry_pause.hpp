#pragma once
// What a front starts ahead of need (a pool's sandboxes, a fork server's zygote) is not started
// again at once after a failure: the next attempt waits kFirst, the pause doubling with each
// failure up to kLongest, so that a host or a profile that refuses it is not asked in a loop. A
// success ends the doubling; the pause already begun runs out.

#include <algorithm>
#include <chrono>

namespace pysandbox::sys {

class RetryPause {
  public:
    using Clock = std::chrono::steady_clock;
    static constexpr std::chrono::milliseconds kFirst{100};
    static constexpr std::chrono::milliseconds kLongest{60'000};

    void failed(Clock::time_point now = Clock::now()) {
        pause_ = std::min(kLongest, std::max(kFirst, pause_ * 2));
        until_ = now + pause_;
    }
    void succeeded() { pause_ = std::chrono::milliseconds{0}; }
    bool may_try(Clock::time_point now = Clock::now()) const { return now >= until_; }
    std::chrono::milliseconds pause() const { return pause_; }

  private:
    std::chrono::milliseconds pause_{0};
    Clock::time_point until_{};
};

}  // namespace pysandbox::sys
