#pragma once
// One poll(2) loop over descriptors whose interest changes from round to round. Each watcher says,
// before every round, which descriptor it waits on and for what (fd -1: nothing this round), and
// is called with the events that came. A live sandbox is a set of such watchers (its pidfd,
// reports, denied system calls, output streams); the front that owns it adds its own (a deadline,
// signals, requests) to the same loop.

#include <poll.h>

#include <cerrno>
#include <functional>
#include <list>
#include <vector>

#include "sys/errors.hpp"

namespace pysandbox::sys {

class Poller {
  public:
    struct Interest {
        int fd = -1;
        short events = 0;
    };
    using InterestFn = std::function<Interest()>;
    using ReadyFn = std::function<void(short revents)>;

    // `owner` groups watchers so that forget() can remove them together.
    void watch(InterestFn interest, ReadyFn ready, const void* owner = nullptr) {
        watchers_.push_back({std::move(interest), std::move(ready), owner, false});
    }

    // Stops asking and calling the watchers `owner` added. Safe from inside a ready callback (a
    // sandbox discarded while the loop handles its end): they are skipped for the rest of the
    // round and removed before the next one.
    void forget(const void* owner) {
        for (Watcher& watcher : watchers_)
            if (watcher.owner == owner) watcher.forgotten = true;
    }

    // One round: asks every watcher, polls (timeout_ms as poll(2); -1 waits), and calls the
    // watchers whose descriptor is ready, in the order they were added. Watchers added during the
    // round wait for the next. False when interrupted by a signal (EINTR) before anything was
    // ready. Throws SysError on any other failure.
    bool poll_once(int timeout_ms = -1) {
        watchers_.remove_if([](const Watcher& watcher) { return watcher.forgotten; });
        fds_.resize(watchers_.size());
        std::size_t i = 0;
        for (const Watcher& watcher : watchers_) {
            const Interest interest = watcher.interest();
            fds_[i++] = {interest.events != 0 ? interest.fd : -1, interest.events, 0};
        }
        if (::poll(fds_.data(), fds_.size(), timeout_ms) < 0) {
            if (errno == EINTR) return false;
            throw SysError("poll", errno);
        }
        // A list: watchers added by a callback do not move the ones being called.
        auto watcher = watchers_.begin();
        for (i = 0; i < fds_.size(); ++i, ++watcher)
            if (fds_[i].fd >= 0 && fds_[i].revents != 0 && !watcher->forgotten)
                watcher->ready(fds_[i].revents);
        return true;
    }

  private:
    struct Watcher {
        InterestFn interest;
        ReadyFn ready;
        const void* owner;
        bool forgotten;
    };
    std::list<Watcher> watchers_;
    std::vector<pollfd> fds_;
};

}  // namespace pysandbox::sys
