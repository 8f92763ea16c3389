#pragma once
// Warm sandboxes: sessions started ahead of need, each handed out once (to a call, a session, a
// batch job) and never back. A started one has its namespaces, its interpreter, `site` and the
// profile's [python] preload modules ready, so what is handed out answers its first cell in the
// time of the cell. Nothing of one user is ever visible to another: a session taken is the
// taker's until it is closed.
//
// The owner drives the poll loop and calls advance() after each round.

#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/session.hpp"
#include "engine/zygote.hpp"
#include "plan/plan.hpp"
#include "sys/poller.hpp"
#include "sys/retry_pause.hpp"

namespace pysandbox {

class Pool {
  public:
    // Keeps `size` sessions of `plan` (a driver plan that outlives the pool) started; 0: none.
    // With a zygote (made for that plan, outliving the pool), they are forked by it, and started
    // only while it is ready.
    Pool(const Plan& plan, sys::Poller& poller, std::size_t size, Zygote* zygote = nullptr);
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    const Plan& plan() const { return plan_; }

    // A session for one user: a warm one when there is one (ready, or still starting), else a new
    // one that starts with its first cell. Its start failure, if any, comes as that cell's result.
    // The pool starts a replacement at the next advance() that may start one.
    std::unique_ptr<Session> take();

    // Takes back a session that has served: it is killed now and reaped as the loop goes on.
    void retire(std::unique_ptr<Session> session);

    // Passes the round on to the waiting sessions and the retired ones; drops those whose sandbox
    // ended, and starts new ones up to the size when `start` says it may. Starting one clones a
    // sandbox in this process (milliseconds the loop does nothing else) and then its interpreter
    // starts beside the running cells: a front whose calls wait on a short cell defers it
    // (fronts/mcp.cpp).
    void advance(bool start = true);

    // Starts new ones up to the size now (what advance(true) does last); returns how many.
    std::size_t refill();
    // Sessions that served and are not reaped yet: their sandboxes are ending.
    bool retiring() const { return !retired_.empty(); }

    // How many are ready now (for a front's -v and the tests).
    std::size_t ready() const;

    // Ends the waiting sessions now (their sandboxes are killed and reaped) and starts no more.
    void close();

  private:
    const Plan& plan_;
    sys::Poller& poller_;
    const std::size_t size_;
    Zygote* zygote_;
    std::deque<std::unique_ptr<Session>> waiting_;
    std::vector<std::unique_ptr<Session>> retired_;
    bool closed_ = false;
    // After a warm start failed, the next waits this long (doubling up to a minute), so a host that
    // refuses sandboxes is not asked again in a loop; a success resets it.
    sys::RetryPause pause_;
};

// A profile a front offers (the MCP server, batch): its driver plan and its warm sandboxes.
struct Offer {
    std::string name;  // as the operator named it with -p
    std::unique_ptr<const Plan> plan;
    // With --fork: the zygote's plan (plan_offers) and the zygote (the front, with its loop).
    std::unique_ptr<const Plan> zygote_plan;
    std::unique_ptr<Zygote> zygote;
    std::unique_ptr<Pool> pool;  // made by the front once its poll loop exists
};

// Every profile named, loaded and planned now, so that a bad one is an error before anything is
// served (the first is the default; a name given twice is offered once). An --output-dir that
// does not exist is made now: the sessions share it. Throws what make_plan throws.
//
// `environments`: the package environment (its ID) each profile's sandboxes mount, by profile
// name, where the front made one for its python.requirements (fronts/env.hpp); the zygote's
// too, so that its interpreter has the packages on sys.path before it forks a job.
// `forked`: the sandboxes are to be forked by a zygote each (zygote.hpp), whose plan is made too.
std::vector<Offer> plan_offers(std::span<const std::string> profiles, const Overrides& overrides,
                               const std::map<std::string, std::string>& environments, int verbose,
                               const std::vector<std::string>& host_env, bool forked = false);

// One profile's offer, planned now: its sandboxes mount `environment` when given (an ID in the
// store of overrides.cache_dir), else what overrides.packages names. A front that serves requests
// asking for packages of their own plans one such offer per environment (fronts/env_requests.hpp).
// Throws what make_plan throws.
Offer plan_offer(const std::string& name, const Overrides& overrides,
                 const std::optional<std::string>& environment, int verbose,
                 const std::vector<std::string>& host_env, bool forked = false);

// The CPUs online: the default of how many calls or jobs run at once.
std::size_t online_cpus();

}  // namespace pysandbox
