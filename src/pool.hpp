#pragma once
// Warm sandboxes: sessions started ahead of need, each handed out once (to a call, a session, a
// batch job) and never back. A started one has its namespaces, its interpreter, `site` and the
// profile's [python] preload modules ready, so what is handed out answers its first cell in the
// time of the cell. Nothing of one user is ever visible to another: a session taken is the
// taker's until it is closed.
//
// The owner drives the poll loop and calls advance() after each round.

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>

#include "plan.hpp"
#include "session.hpp"
#include "sys/poller.hpp"

namespace pysandbox {

class Pool {
  public:
    // Keeps `size` sessions of `plan` (a driver plan that outlives the pool) started; 0: none.
    Pool(const Plan& plan, sys::Poller& poller, std::size_t size);
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    const Plan& plan() const { return plan_; }

    // A session for one user: a warm one when there is one (ready, or still starting), else a new
    // one that starts with its first cell. Its start failure, if any, comes as that cell's result.
    // The pool starts a replacement at the next advance().
    std::unique_ptr<Session> take();

    // Passes the round on to the waiting sessions; drops those whose sandbox ended, and starts new
    // ones up to the size.
    void advance();

    // How many are ready now (for a front's -v and the tests).
    std::size_t ready() const;

    // Ends the waiting sessions now (their sandboxes are killed and reaped) and starts no more.
    void close();

  private:
    void refill();

    const Plan& plan_;
    sys::Poller& poller_;
    const std::size_t size_;
    std::deque<std::unique_ptr<Session>> waiting_;
    bool closed_ = false;
    // After a warm start failed, the next waits this long (doubling up to a minute), so a host that
    // refuses sandboxes is not asked again in a loop; a success resets it.
    std::chrono::milliseconds backoff_{0};
    std::chrono::steady_clock::time_point next_start_{};
};

}  // namespace pysandbox
