#include "fronts/env_requests.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <stdexcept>

#include "embed/version.hpp"
#include "fronts/env.hpp"
#include "fronts/front_loop.hpp"
#include "report/exit_codes.hpp"
#include "report/result.hpp"
#include "sys/errors.hpp"

namespace pysandbox {
namespace {

using ordered_json = nlohmann::ordered_json;

// What the installs' children may write that is read: their answer is a line of JSON, and on a
// failure before pip ran, a few lines on stderr.
constexpr std::size_t kMaxChildOutput = 1 << 20;
constexpr std::size_t kTailLines = 20;
// Packages asked for and installed that a front remembers; past that the oldest is asked of the
// store again (a child that finds it there and runs no pip).
constexpr std::size_t kRemembered = 256;

sys::UniqueFd memory_file(const char* name) {
    sys::UniqueFd fd(::memfd_create(name, MFD_CLOEXEC));
    if (!fd) throw SysError(std::string("memfd_create(") + name + ")", errno);
    return fd;
}

std::string read_all(int fd) {
    std::string text(kMaxChildOutput, '\0');
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n =
            ::pread(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += static_cast<std::size_t>(n);
    }
    text.resize(done);
    return text;
}

std::string joined(const std::vector<std::string>& specs, std::string_view separator) {
    std::string text;
    for (const std::string& spec : specs) {
        if (!text.empty()) text += separator;
        text += spec;
    }
    return text;
}

}  // namespace

struct RequestEnvironments::Install {
    std::string key;
    std::vector<std::string> specs;  // what pip is asked for: the profile's, then the request's
    std::shared_ptr<AskedEnvironment> asked;
    std::unique_ptr<sys::ChildGuard> child;  // none while it waits its turn (kMaxInstalls)
    sys::UniqueFd out;                       // the child's stdout and stderr, in memory
    sys::UniqueFd err;
    bool ended = false;
};

RequestEnvironments::RequestEnvironments(const std::vector<Offer>& offers, Options options,
                                         sys::Poller& poller)
    : base_(offers), options_(std::move(options)), poller_(poller) {}

RequestEnvironments::~RequestEnvironments() {
    // An install still running is killed (its sandbox with it: PR_SET_PDEATHSIG); what it
    // staged is removed by the next `env create`, and nothing half-built is ever published.
    for (const auto& install : installs_) poller_.forget(install.get());
}

std::shared_ptr<const AskedEnvironment> RequestEnvironments::ask(
    std::size_t profile, const std::vector<std::string>& specs) {
    if (options_.overrides.packages)
        throw std::invalid_argument(
            "\"requirements\" cannot be given here: --with-env names the one environment every "
            "sandbox of this " +
            options_.front +
            " mounts, and a request cannot add to it (make one environment of every package: "
            "pysandbox env create)");
    std::vector<std::string> all = base_[profile].plan->profile.requirements;
    all.insert(all.end(), specs.begin(), specs.end());
    const std::string key = base_[profile].name + "\n" + joined(all, "\n");
    if (const auto ready = ready_.find(key); ready != ready_.end()) return ready->second;
    for (const auto& install : installs_)
        if (install->key == key) return install->asked;
    auto install = std::make_unique<Install>();
    install->key = key;
    install->specs = std::move(all);
    install->asked = std::make_shared<AskedEnvironment>();
    install->asked->profile = profile;
    auto asked = install->asked;
    installs_.push_back(std::move(install));
    advance();  // started now, unless kMaxInstalls are running
    return asked;
}

// `pysandbox env create --json` with the profile's sources, the front's store and the packages:
// exec'ed, so the child holds none of the front's descriptors, sandboxes or signal mask.
void RequestEnvironments::start(Install& install) {
    const Profile& profile = base_[install.asked->profile].plan->profile;
    std::vector<std::string> args = {"pysandbox", "env", "create", "--json"};
    if (options_.overrides.cache_dir)
        args.insert(args.end(), {"--cache-dir", *options_.overrides.cache_dir});
    for (const std::string& dir : profile.find_links)
        args.insert(args.end(), {"--find-links", dir});
    if (!profile.index_url.empty()) args.insert(args.end(), {"--index-url", profile.index_url});
    args.insert(args.end(), install.specs.begin(), install.specs.end());
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    std::vector<std::string> env = options_.host_env;
    std::vector<char*> envp;
    envp.reserve(env.size() + 1);
    for (std::string& entry : env) envp.push_back(entry.data());
    envp.push_back(nullptr);

    install.out = memory_file("pysandbox-install-stdout");
    install.err = memory_file("pysandbox-install-stderr");
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawnattr_init(&attributes);
    ::posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    ::posix_spawn_file_actions_adddup2(&actions, install.out.get(), STDOUT_FILENO);
    ::posix_spawn_file_actions_adddup2(&actions, install.err.get(), STDERR_FILENO);
    ::posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
    sigset_t none;
    ::sigemptyset(&none);
    ::posix_spawnattr_setsigmask(&attributes, &none);  // the front's loop blocks stop signals
    ::posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
    pid_t pid = 0;
    const int spawned =
        ::posix_spawn(&pid, "/proc/self/exe", &actions, &attributes, argv.data(), envp.data());
    ::posix_spawn_file_actions_destroy(&actions);
    ::posix_spawnattr_destroy(&attributes);
    if (spawned != 0) throw SysError("posix_spawn(/proc/self/exe env create)", spawned);
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) {
        const int error = errno;
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        throw SysError("pidfd_open(" + std::to_string(pid) + ")", error);
    }
    install.child = std::make_unique<sys::ChildGuard>(pidfd, pid);
    poller_.watch(
        [&install] {
            return sys::Poller::Interest{install.ended ? -1 : install.child->pidfd(), POLLIN};
        },
        [&install](short) { install.ended = true; }, &install);
}

void RequestEnvironments::finish(Install& install) {
    const siginfo_t info = install.child->reap();
    AskedEnvironment& asked = *install.asked;
    const std::string out = read_all(install.out.get());
    const std::string err = read_all(install.err.get());
    const ordered_json answer = ordered_json::parse(env::tail(out, 1), nullptr, false);
    const bool exited_ok = info.si_code == CLD_EXITED && info.si_status == 0;
    if (exited_ok && answer.is_object() && answer.value("status", "") == "ok" &&
        answer.contains("id") && answer["id"].is_string()) {
        asked.id = answer["id"].get<std::string>();
        asked.state = AskedEnvironment::State::ready;
        if (ready_.size() >= kRemembered) ready_.erase(ready_.begin());
        ready_[install.key] = install.asked;
        if (!answer.value("reused", false))
            say("installed " + joined(install.specs, ", ") + " into a new environment " +
                    asked.id.substr(0, 12) + " (pip, inside a sandbox); later requests reuse it",
                "pysandbox " + options_.front);
        return;
    }
    if (answer.is_object() && answer.value("status", "") == "install_error") {
        asked.failure = answer;
    } else {
        // pip never ran: the child said why on stderr (a source that cannot be read, a store
        // that is not trusted), as `pysandbox env create` says it.
        std::string why = env::tail(err, 1);
        if (why.starts_with("pysandbox: ")) why.erase(0, 11);
        if (!why.empty() && why.back() == '\n') why.pop_back();
        if (why.empty())
            why = "pysandbox env create ended with wait status " + std::to_string(info.si_status) +
                  " and said nothing";
        asked.failure = {{"schema", kResultSchema},
                         {"version", kVersion},
                         {"status", "install_error"},
                         {"pysandbox_exit_code", exit_codes::kInstallError},
                         {"message", "the packages could not be installed: " + why},
                         {"install",
                          {{"requested", install.specs},
                           {"output_tail", env::tail(err, kTailLines)},
                           {"denied_connections", ordered_json::array()}}}};
    }
    asked.state = AskedEnvironment::State::failed;
    say("install_error: " + asked.failure.value("message", std::string()),
        "pysandbox " + options_.front);
}

void RequestEnvironments::advance() {
    for (auto it = installs_.begin(); it != installs_.end();) {
        Install& install = **it;
        if (!install.ended) {
            ++it;
            continue;
        }
        poller_.forget(&install);
        finish(install);
        it = installs_.erase(it);
    }
    std::size_t running = static_cast<std::size_t>(std::ranges::count_if(
        installs_, [](const auto& install) { return install->child != nullptr; }));
    for (const auto& install : installs_) {
        if (running >= kMaxInstalls) break;
        if (install->child) continue;
        try {
            start(*install);
            ++running;
        } catch (const SysError& e) {
            install->asked->failure = {
                {"schema", kResultSchema},
                {"version", kVersion},
                {"status", "install_error"},
                {"pysandbox_exit_code", exit_codes::kInstallError},
                {"message", std::string("the install could not be started: ") + e.what()},
                {"install",
                 {{"requested", install->specs},
                  {"output_tail", ""},
                  {"denied_connections", ordered_json::array()}}}};
            install->asked->state = AskedEnvironment::State::failed;
        }
    }
    std::erase_if(installs_, [](const auto& install) {
        return install->asked->state == AskedEnvironment::State::failed && !install->child;
    });
}

std::shared_ptr<Offer> RequestEnvironments::offer(const AskedEnvironment& ready) {
    const auto key = std::pair(ready.profile, ready.id);
    if (const auto held = held_.find(key); held != held_.end()) {
        held->second.used = ++hand_outs_;
        return held->second.offer;
    }
    if (held_.size() >= kMaxEnvironmentOffers) evict_one();
    auto offer =
        std::make_shared<Offer>(plan_offer(base_[ready.profile].name, options_.overrides, ready.id,
                                           options_.verbose, options_.host_env, options_.forked));
    if (offer->zygote_plan)
        offer->zygote = std::make_unique<Zygote>(*offer->plan, *offer->zygote_plan, poller_);
    offer->pool =
        std::make_unique<Pool>(*offer->plan, poller_, options_.pool_size, offer->zygote.get());
    if (pools_closed_) offer->pool->close();
    held_[key] = {offer, ++hand_outs_};
    return offer;
}

// The least recently used environment that nothing holds (use_count 1: only held_) goes, its
// warm sandboxes and zygote with it. One in use stays: its sandboxes serve.
void RequestEnvironments::evict_one() {
    auto oldest = held_.end();
    for (auto it = held_.begin(); it != held_.end(); ++it)
        if (it->second.offer.use_count() == 1 &&
            (oldest == held_.end() || it->second.used < oldest->second.used))
            oldest = it;
    if (oldest == held_.end()) return;
    oldest->second.offer->pool->close();
    held_.erase(oldest);
}

std::vector<Offer*> RequestEnvironments::offers() const {
    std::vector<Offer*> offers;
    for (const auto& [key, held] : held_) offers.push_back(held.offer.get());
    return offers;
}

void RequestEnvironments::close_pools() {
    pools_closed_ = true;
    for (const auto& [key, held] : held_) held.offer->pool->close();
}

}  // namespace pysandbox
