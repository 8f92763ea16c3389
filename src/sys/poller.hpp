#pragma once
// One poll(2) loop over descriptors whose interest changes from round to round. Each watcher says,
// before every round, which descriptor it waits on and for what (fd -1: nothing this round), and
// is called with the events that came. The supervisor's loop is a set of such watchers: the
// sandbox's pidfd, its deadline, signals, reports, denied system calls and the output streams.

#include <poll.h>

#include <cerrno>
#include <functional>
#include <vector>

#include "errors.hpp"

namespace pysandbox::sys {

class Poller {
  public:
    struct Interest {
        int fd = -1;
        short events = 0;
    };
    using InterestFn = std::function<Interest()>;
    using ReadyFn = std::function<void(short revents)>;

    void watch(InterestFn interest, ReadyFn ready) {
        watchers_.push_back({std::move(interest), std::move(ready)});
    }

    // One round: asks every watcher, polls (timeout_ms as poll(2); -1 waits), and calls the
    // watchers whose descriptor is ready, in the order they were added. False when interrupted
    // by a signal (EINTR) before anything was ready. Throws SysError on any other failure.
    bool poll_once(int timeout_ms = -1) {
        fds_.resize(watchers_.size());
        for (std::size_t i = 0; i < watchers_.size(); ++i) {
            const Interest interest = watchers_[i].interest();
            fds_[i] = {interest.events != 0 ? interest.fd : -1, interest.events, 0};
        }
        if (::poll(fds_.data(), fds_.size(), timeout_ms) < 0) {
            if (errno == EINTR) return false;
            throw SysError("poll", errno);
        }
        for (std::size_t i = 0; i < watchers_.size(); ++i)
            if (fds_[i].fd >= 0 && fds_[i].revents != 0) watchers_[i].ready(fds_[i].revents);
        return true;
    }

  private:
    struct Watcher {
        InterestFn interest;
        ReadyFn ready;
    };
    std::vector<Watcher> watchers_;
    std::vector<pollfd> fds_;
};

}  // namespace pysandbox::sys
