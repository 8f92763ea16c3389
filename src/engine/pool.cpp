#include "engine/pool.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>

#include "engine/artifacts.hpp"
#include "plan/profile.hpp"
#include "sys/errors.hpp"

namespace pysandbox {

Pool::Pool(const Plan& plan, sys::Poller& poller, std::size_t size, Zygote* zygote)
    : plan_(plan), poller_(poller), size_(size), zygote_(zygote) {
    refill();
}

std::unique_ptr<Session> Pool::take() {
    // The longest waiting first: the most likely to be ready.
    std::unique_ptr<Session> session;
    // One forked by a zygote that ended since is dying: never handed out.
    while (!waiting_.empty() && waiting_.front()->orphaned()) {
        retire(std::move(waiting_.front()));
        waiting_.pop_front();
    }
    if (!waiting_.empty()) {
        session = std::move(waiting_.front());
        waiting_.pop_front();
    } else {
        session = std::make_unique<Session>(plan_, poller_, zygote_);
    }
    // The next one starts in advance(), after this round: the taker's cell goes first.
    return session;
}

void Pool::retire(std::unique_ptr<Session> session) {
    session->close();
    retired_.push_back(std::move(session));
}

void Pool::advance(bool start) {
    if (zygote_ && !closed_) zygote_->advance();  // closed: nothing more is forked from it
    for (auto& session : retired_) session->advance();
    std::erase_if(retired_, [](const auto& session) { return session->closed(); });
    for (auto& session : waiting_) session->advance();
    // A sandbox that ended while it waited (its start failed, or it was killed from outside) is
    // of no use to anyone.
    const auto failed = std::remove_if(waiting_.begin(), waiting_.end(), [](const auto& session) {
        return session->start_failure().has_value() || session->closed() || session->orphaned();
    });
    if (failed != waiting_.end()) {
        pause_.failed();
        waiting_.erase(failed, waiting_.end());
    } else if (std::ranges::any_of(waiting_, [](const auto& s) { return s->ready(); })) {
        pause_.succeeded();
    }
    if (start) refill();
}

std::size_t Pool::ready() const {
    return static_cast<std::size_t>(
        std::ranges::count_if(waiting_, [](const auto& session) { return session->ready(); }));
}

void Pool::close() {
    closed_ = true;
    waiting_.clear();
    retired_.clear();
}

std::size_t Pool::refill() {
    if (zygote_ && !zygote_->ready()) return 0;  // none ahead: a taker's waits for it, in the loop
    std::size_t started = 0;
    while (!closed_ && waiting_.size() < size_ && pause_.may_try()) {
        auto session = std::make_unique<Session>(plan_, poller_, zygote_);
        try {
            session->start();
        } catch (const std::exception&) {
            // The host refused a sandbox (clone3, the id maps): a taker's own start says why.
            pause_.failed();
            return started;
        }
        waiting_.push_back(std::move(session));
        ++started;
    }
    return started;
}

Offer plan_offer(const std::string& name, const Overrides& overrides,
                 const std::optional<std::string>& environment, int verbose,
                 const std::vector<std::string>& host_env, bool forked) {
    Request request;
    request.program.kind = Program::Kind::driver;
    request.overrides = overrides;
    if (environment) request.overrides.packages = *environment;
    request.capture_output = true;
    request.verbose = verbose > 1 ? verbose - 1 : 0;
    request.forked = forked;
    Offer offer;
    offer.name = name;
    offer.plan = make_plan(load_profile(name, profile_search_dirs()), request, host_env);
    if (forked) offer.zygote_plan = plan_zygote(*offer.plan, name, request.overrides, host_env);
    return offer;
}

std::vector<Offer> plan_offers(std::span<const std::string> profiles, const Overrides& overrides,
                               const std::map<std::string, std::string>& environments, int verbose,
                               const std::vector<std::string>& host_env, bool forked) {
    if (overrides.output_dir && !artifacts::make_host_dir(AT_FDCWD, *overrides.output_dir) &&
        errno != EEXIST)
        throw UsageError("--output-dir: cannot create " + *overrides.output_dir + ": " +
                         std::strerror(errno));
    std::vector<Offer> offers;
    for (const std::string& name : profiles) {
        if (std::ranges::find(offers, name, &Offer::name) != offers.end()) continue;
        const auto environment = environments.find(name);
        offers.push_back(plan_offer(name, overrides,
                                    environment != environments.end()
                                        ? std::optional<std::string>(environment->second)
                                        : std::nullopt,
                                    verbose, host_env, forked));
    }
    return offers;
}

std::size_t online_cpus() {
    const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? static_cast<std::size_t>(n) : 1;
}

}  // namespace pysandbox
