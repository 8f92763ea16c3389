#pragma once
// The package environments a front's requests ask for themselves (a batch job's, an MCP call's or
// session's "requirements"), and the warm sandboxes of each.
//
// An environment is asked of `pysandbox env create --json` in a child process: the same code, key,
// store and install sandbox as `run --with`. The front's poll loop watches the child's pidfd, so
// it serves its other requests while pip runs. What the child answered is remembered: the same
// packages asked for again go at once, without a child; asked for while they are being
// installed, they wait for that one install. A failed install answers the requests that waited
// for it (status install_error) and is not remembered: the next request tries again.
//
// The sandboxes of an environment are another offer of the same profile (engine/pool.hpp): its
// plan mounts the environment read-only, as `run --with-env` does, and it has its own pool (and,
// forked, its own zygote, whose interpreter has the packages on sys.path), made when the
// environment is first used. At most kMaxEnvironmentOffers are kept; making one more closes the
// least recently used one that no call, job or session holds.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/pool.hpp"
#include "plan/request.hpp"
#include "sys/child_guard.hpp"
#include "sys/poller.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox {

// Environments whose sandboxes a front keeps planned and pooled at once (pysandbox(1) says it).
inline constexpr std::size_t kMaxEnvironmentOffers = 8;
// Installs a front runs at once; a request for another new environment past that waits.
inline constexpr std::size_t kMaxInstalls = 4;

// What a request's packages came to.
// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json's own destructor may allocate.
struct AskedEnvironment {
    enum class State { installing, ready, failed };
    State state = State::installing;
    std::size_t profile = 0;  // the offer (an index into the front's) whose profile it extends
    std::string id;           // ready: the environment's ID
    // failed: the install_error result (pysandbox.result/v1) to answer each waiting request with.
    nlohmann::ordered_json failure;
};

class RequestEnvironments {
  public:
    struct Options {
        Overrides overrides;  // the front's: --cache-dir, --with-env, --output-dir
        int verbose = 0;
        std::vector<std::string> host_env;
        std::size_t pool_size = 0;  // warm sandboxes of each environment's pool
        bool forked = false;        // batch --fork: a zygote per environment
        std::string front;          // "batch", "mcp": in what it says on stderr and in errors
    };

    // `offers`: the front's, one per profile (they outlive this); their plans' profiles say what
    // every environment of theirs also holds (python.requirements) and where pip finds it
    // (find_links, index_url).
    RequestEnvironments(const std::vector<Offer>& offers, Options options, sys::Poller& poller);
    ~RequestEnvironments();
    RequestEnvironments(const RequestEnvironments&) = delete;
    RequestEnvironments& operator=(const RequestEnvironments&) = delete;

    // The environment of `profile`'s python.requirements and `specs` (checked by the request's
    // parser): ready at once when this front had it before, else installing. Throws
    // std::invalid_argument when the front mounts --with-env's environment in every sandbox.
    std::shared_ptr<const AskedEnvironment> ask(std::size_t profile,
                                                const std::vector<std::string>& specs);

    // The offer of a ready environment: planned, pooled (and its zygote started) when first used.
    // The caller holds it while a sandbox of its pool serves. Throws what make_plan throws.
    std::shared_ptr<Offer> offer(const AskedEnvironment& ready);

    // After each poll round: the installs that ended are read (their requests are answered by
    // their fronts, which look at what ask() returned).
    void advance();

    // Each environment's offer held now (its pool, to advance, refill or close).
    std::vector<Offer*> offers() const;

    // Starts no more warm sandboxes: those of the pools held and of each one made later.
    void close_pools();

  private:
    struct Install;
    void start(Install& install);
    void finish(Install& install);
    void evict_one();

    const std::vector<Offer>& base_;
    Options options_;
    sys::Poller& poller_;
    // By profile and packages: those ready (remembered), and those being installed or waiting.
    std::map<std::string, std::shared_ptr<AskedEnvironment>> ready_;
    std::vector<std::unique_ptr<Install>> installs_;
    struct Held {
        std::shared_ptr<Offer> offer;
        std::uint64_t used = 0;  // when last handed out, in hand-outs
    };
    std::map<std::pair<std::size_t, std::string>, Held> held_;  // by profile and ID
    std::uint64_t hand_outs_ = 0;
    bool pools_closed_ = false;
};

}  // namespace pysandbox
