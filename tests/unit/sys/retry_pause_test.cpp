// The pause a pool or a zygote keeps between failed starts.

#include <doctest/doctest.h>

#include "sys/retry_pause.hpp"

using pysandbox::sys::RetryPause;
using std::chrono::milliseconds;

TEST_CASE("a retry pause doubles from the first to the longest, and a success ends the doubling") {
    const RetryPause::Clock::time_point t0{};
    RetryPause pause;
    CHECK(pause.may_try(t0));
    pause.failed(t0);
    CHECK(pause.pause() == RetryPause::kFirst);
    CHECK_FALSE(pause.may_try(t0 + milliseconds{99}));
    CHECK(pause.may_try(t0 + milliseconds{100}));
    pause.failed(t0);
    CHECK(pause.pause() == milliseconds{200});
    for (int i = 0; i < 20; ++i) pause.failed(t0);
    CHECK(pause.pause() == RetryPause::kLongest);
    CHECK_FALSE(pause.may_try(t0 + milliseconds{59'999}));
    pause.succeeded();
    CHECK(pause.pause() == milliseconds{0});
    pause.failed(t0);
    CHECK(pause.pause() == RetryPause::kFirst);
}
