#pragma once

#include <sys/timerfd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "sys/unique_fd.hpp"

namespace pysandbox::sys {

// A CLOCK_MONOTONIC one-shot deadline that poll() can watch.
class TimerFd {
  public:
    TimerFd()
        : fd_(check_sys(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK),
                        "timerfd_create(CLOCK_MONOTONIC)")) {}

    void arm(std::chrono::nanoseconds after) {
        itimerspec spec{};
        auto ns = std::max<std::int64_t>(after.count(), 1);  // 0 would disarm
        spec.it_value.tv_sec = ns / 1'000'000'000;
        spec.it_value.tv_nsec = ns % 1'000'000'000;
        check_sys(::timerfd_settime(fd_.get(), 0, &spec, nullptr), "timerfd_settime");
    }

    void disarm() noexcept {
        itimerspec spec{};
        ::timerfd_settime(fd_.get(), 0, &spec, nullptr);
        acknowledge();
    }

    // Clears the expiry so poll() stops reporting it.
    void acknowledge() noexcept {
        std::uint64_t expirations;
        [[maybe_unused]] auto n = ::read(fd_.get(), &expirations, sizeof expirations);
    }

    int get() const noexcept { return fd_.get(); }

  private:
    UniqueFd fd_;
};

}  // namespace pysandbox::sys
