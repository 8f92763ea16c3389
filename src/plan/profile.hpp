#pragma once
// A profile is a TOML file of limits and rules. This file turns one (and the chain it extends) into
// a Profile value, validating every key against one table (kKeys) that also drives `profile show`
// and the documentation.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "plan/install_paths.hpp"
#include "plan/policy.hpp"
#include "plan/seccomp.hpp"
#include "proxy/allowlist.hpp"

namespace pysandbox {

// The network modes, spelled here once: profiles, flags, results and the docs read this table.
enum class NetMode { none, loopback, proxy };
struct NetModeName {
    NetMode mode;
    std::string_view name;
};
inline constexpr NetModeName kNetModes[] = {
    {NetMode::none, "none"}, {NetMode::loopback, "loopback"}, {NetMode::proxy, "proxy"}};
std::string_view to_string(NetMode mode);
std::optional<NetMode> net_mode_named(std::string_view name);

// The kernel that answers the script's system calls: the host's, behind the namespaces, seccomp and
// Landlock, or gVisor's (runsc), a kernel in user space between the script and the host's
// (plan/gvisor.hpp). Spelled here once, as the network modes are.
enum class KernelChoice { host, gvisor };
struct KernelName {
    KernelChoice kernel;
    std::string_view name;
};
inline constexpr KernelName kKernels[] = {{KernelChoice::host, "host"},
                                          {KernelChoice::gvisor, "gvisor"}};
std::string_view to_string(KernelChoice kernel);
std::optional<KernelChoice> kernel_named(std::string_view name);

inline constexpr std::uint64_t kMinMemory = 16ULL << 20;  // python3 cannot start with less
inline constexpr std::uint64_t kMinTmpSize = 4096;

struct Limits {
    std::chrono::milliseconds wall_time{5000};  // of a run; of each cell in a session
    std::chrono::milliseconds cpu_time{5000};   // of a run; of a whole session
    std::uint64_t memory = 256ULL << 20;
    std::uint64_t max_procs = 64;  // processes and threads together (RLIMIT_NPROC / pids.max)
    std::uint64_t open_files = 256;
    std::uint64_t file_size = 64ULL << 20;
    std::uint64_t tmp_size = 64ULL << 20;
    std::uint64_t output_limit = 16ULL << 20;
    std::uint64_t cpus = 1;  // CPUs the script may run on; also the numeric libraries' thread pools
    std::uint64_t artifact_size = 64ULL << 20;     // largest artifact --output-dir copies
    std::uint64_t artifacts_total = 256ULL << 20;  // all artifacts --output-dir copies, together
    // A session ends when no request came for idle_timeout, and after lifetime whatever comes.
    std::chrono::milliseconds idle_timeout{std::chrono::minutes(10)};
    std::chrono::milliseconds lifetime{std::chrono::hours(1)};
    // What one sandbox may take of counts the kernel keeps for the host user as a whole (every
    // process of that user shares them): queued signals, inotify instances and watches.
    std::uint64_t pending_signals = 64;
    std::uint64_t inotify_instances = 8;
    std::uint64_t inotify_watches = 1024;
};

struct Network {
    NetMode mode = NetMode::none;
    proxy::Allowlist allow;  // the proxy's destinations (mode "proxy")
};

struct Profile {
    std::string name;                            // what the user asked for, e.g. "default"
    std::vector<std::filesystem::path> sources;  // the files read, most derived first
    std::string description;
    Limits limits;
    Network network;
    KernelChoice kernel = KernelChoice::host;
    std::vector<std::string> ro_paths;  // host paths bound read-only, same place inside
    std::string interpreter = "/usr/bin/python3";
    std::vector<std::string> interpreter_args;  // before the script, e.g. "-s"
    // Modules the cell driver imports when a sandbox starts, before any code arrives (sessions,
    // the server, batch; `run` does not use the driver).
    std::vector<std::string> preload;
    // Packages `run` installs into an environment (made once, reused) and mounts, with where pip
    // finds them (fronts/env.hpp, run_packages); run's --with, --find-links, --index-url add to
    // or replace them.
    std::vector<std::string> requirements;
    std::vector<std::string> find_links;
    std::string index_url;
    std::map<std::string, std::string> env_set;  // set inside, whatever the host has
    std::vector<std::string> env_pass;           // copied from the host when present
    seccomp::Settings seccomp;
    policy::Rules policy;
};

// The bounds a limit is held to wherever it comes from (a profile, a flag, a request): parse and
// check. Throw std::invalid_argument saying what would be accepted.
std::chrono::milliseconds parse_limit_duration(std::string_view text);  // more than 0
std::uint64_t parse_limit_size(std::string_view text, std::uint64_t minimum = 0);

// Resolves a profile reference: a path when it contains '/', else NAME.toml in search_dirs (never
// the current directory). Throws ProfileError when nothing is found.
std::filesystem::path find_profile(std::string_view ref,
                                   std::span<const std::filesystem::path> search_dirs);

// Loads ref and the chain it extends; validates every file. Throws ProfileError.
Profile load_profile(std::string_view ref, std::span<const std::filesystem::path> search_dirs);

// Same, from TOML text (for tests); `origin` is the file name used in messages.
Profile load_profile_text(std::string_view text, const std::filesystem::path& origin,
                          std::span<const std::filesystem::path> search_dirs);

// Every profile found in search_dirs (first one of a name wins): name -> file.
std::map<std::string, std::filesystem::path> list_profiles(
    std::span<const std::filesystem::path> search_dirs);

// The resolved profile as TOML, every key present (what `profile show` prints).
std::string to_toml(const Profile& profile);

// The profile keys: dotted path, type, one line of documentation, and the built-in default (the
// value a key has when no profile sets it, as TOML; empty for a key with nothing to show).
struct KeyDoc {
    std::string_view path;
    std::string_view type;
    std::string_view doc;
    std::string default_value;
};
std::vector<KeyDoc> profile_keys();

}  // namespace pysandbox
