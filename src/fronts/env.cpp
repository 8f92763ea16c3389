#include "fronts/env.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <variant>

#include <nlohmann/json.hpp>

#include "embed/version.hpp"
#include "engine/execute.hpp"
#include "fronts/front_loop.hpp"
#include "plan/env_store.hpp"
#include "plan/host_files.hpp"
#include "plan/install_paths.hpp"
#include "plan/plan.hpp"
#include "plan/profile.hpp"
#include "plan/units.hpp"
#include "report/encoding.hpp"
#include "report/exit_codes.hpp"
#include "report/json_text.hpp"
#include "report/result.hpp"
#include "sys/dir_names.hpp"
#include "sys/errors.hpp"
#include "sys/sha256.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox::env {
namespace fs = std::filesystem;
namespace {

constexpr std::uint64_t kTextCap = 16ULL << 20;  // a requirements file or a script
// Inside the install's sandbox, beneath its workdir (/tmp/work).
constexpr std::string_view kSiteName = "site";
constexpr std::string_view kRequirementsName = "requirements.txt";
constexpr std::string_view kLinksName = "links";
constexpr std::size_t kTailLines = 20;  // of pip's output, in an install_error

// pip, as `python3 -m pip` starts it, without the -m: the sandbox runs code or a script.
constexpr std::string_view kPipMain =
    "import runpy, sys\n"
    "sys.argv[0] = 'pip'\n"
    "runpy.run_module('pip', run_name='__main__', alter_sys=True)\n";

std::string trim(std::string_view text) {
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return {};
    const auto last = text.find_last_not_of(" \t\r\n");
    return std::string(text.substr(first, last - first + 1));
}

std::string read_text(const std::string& path, std::string_view flag) {
    HostFile file = read_host_file(path, kTextCap);
    if (file.problem == HostFile::Problem::none) return std::move(file.data);
    throw UsageError(std::string(flag) + ": " + path + ": " +
                     (file.error != 0 ? std::strerror(file.error) : "not a readable regular file"));
}

// Whether pip would read `spec` as an option: it strips a line (Python's str.strip: ASCII
// whitespace, \x1c-\x1f and Unicode spaces) before it looks for a leading '-'. Any byte
// outside ASCII is skipped as if a space (no requirement starts with one).
bool is_option(std::string_view spec) {
    const auto first = std::ranges::find_if(spec, [](char c) {
        const auto byte = static_cast<unsigned char>(c);
        return byte < 0x80 && byte != ' ' && (byte < '\t' || byte > '\r') &&
               (byte < 0x1c || byte > 0x1f);
    });
    return first != spec.end() && *first == '-';
}

std::vector<std::string> requirements_file(const std::string& path, std::string_view flag) {
    std::vector<std::string> specs;
    std::istringstream lines(read_text(path, flag));
    std::string line;
    for (int number = 1; std::getline(lines, line); ++number) {
        if (const auto hash = line.find('#');
            hash != std::string::npos &&
            (hash == 0 || line[hash - 1] == ' ' || line[hash - 1] == '\t'))
            line.erase(hash);
        std::string spec = trim(line);
        if (spec.empty()) continue;
        check_requirement(spec, path + ":" + std::to_string(number));
        specs.push_back(std::move(spec));
    }
    return specs;
}

// A wheelhouse's files, read now as the caller (a directory only pysandbox's caller can read
// still works, and nothing of it is bound into the sandbox).
struct Link {
    std::string name;
    std::string data;
};
std::vector<std::vector<Link>> read_wheelhouses(const EnvInvocation& invocation) {
    std::vector<std::vector<Link>> houses;
    std::uint64_t total = 0;
    for (const std::string& dir : invocation.find_links) {
        std::error_code ec;
        fs::directory_iterator entries(dir, ec);
        if (ec) throw UsageError("--find-links: " + dir + ": " + ec.message());
        std::vector<Link> links;
        for (const auto& entry : entries) {
            const std::string name = entry.path().filename().string();
            if (!entry.is_regular_file(ec) || name.starts_with('.')) continue;
            HostFile file = read_host_file(entry.path().string(), invocation.max_size, O_NOFOLLOW);
            if (file.problem != HostFile::Problem::none) continue;  // a link, a FIFO: not a wheel
            total += file.data.size();
            if (total > invocation.max_size)
                throw UsageError("--find-links: the wheelhouses hold more than --max-size " +
                                 units::format_size(invocation.max_size));
            links.push_back({name, std::move(file.data)});
        }
        std::ranges::sort(links, {}, &Link::name);
        houses.push_back(std::move(links));
    }
    return houses;
}

// "https://host:port/path" -> the proxy's rule for HOST:PORT.
proxy::AllowRule index_rule(const std::string& url) {
    std::string_view rest = url;
    std::uint16_t port = 0;
    if (rest.starts_with("https://")) {
        rest.remove_prefix(8);
        port = 443;
    } else if (rest.starts_with("http://")) {
        rest.remove_prefix(7);
        port = 80;
    } else {
        throw UsageError("--index-url: \"" + url + "\" is not an http:// or https:// URL");
    }
    std::string authority(rest.substr(0, rest.find('/')));
    if (authority.find('@') != std::string::npos)
        throw UsageError("--index-url: credentials in the URL are not passed into the sandbox");
    const bool has_port =
        authority.find(':', authority.rfind(']') == std::string::npos ? 0 : authority.rfind(']')) !=
        std::string::npos;
    try {
        return proxy::parse_allow_rule(has_port ? authority
                                                : authority + ":" + std::to_string(port));
    } catch (const std::invalid_argument& e) {
        throw UsageError("--index-url: \"" + url + "\": " + e.what());
    }
}

constexpr std::string_view kDefaultIndex = "https://pypi.org/simple";

std::string index_of(const EnvInvocation& invocation) {
    if (!invocation.index_url.empty()) return invocation.index_url;
    return invocation.find_links.empty() ? std::string(kDefaultIndex) : std::string();
}

// What the interpreter is, for the key: its real path, size and modification time (a new
// Python is a new key) and the machine.
std::string interpreter_identity(const std::string& interpreter) {
    std::error_code ec;
    const fs::path real = fs::canonical(interpreter, ec);
    struct stat st {};
    if (ec || ::stat(real.c_str(), &st) != 0)
        throw UsageError("python.interpreter: " + interpreter + ": not found");
    utsname name{};
    ::uname(&name);
    return real.string() + "\n" + std::to_string(st.st_size) + "\n" +
           std::to_string(st.st_mtim.tv_sec) + "\n" + name.sysname + "\n" + name.machine + "\n";
}

std::string platform() {
    utsname name{};
    ::uname(&name);
    return std::string(name.sysname) + "-" + name.machine;
}

// The request's key: what was asked for, from where, for which interpreter.
std::string request_key(const std::string& interpreter, const std::vector<std::string>& specs,
                        const std::vector<std::vector<Link>>& houses, const std::string& index,
                        bool allow_build) {
    std::string text = "pysandbox-env-request/1\n" + interpreter_identity(interpreter);
    text += "index " + index + "\nbuild " + (allow_build ? "1" : "0") + "\n";
    for (const std::string& spec : specs) text += "spec " + spec + "\n";
    for (const auto& house : houses) {
        text += "house\n";
        for (const Link& link : house)
            text += "link " + link.name + " " + Sha256::of(link.data) + "\n";
    }
    return Sha256::of(text);
}

void write_file(const fs::path& path, std::string_view data, mode_t mode) {
    sys::UniqueFd fd(
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (!fd) throw SysError("open(" + path.string() + ", O_CREAT|O_EXCL)", errno);
    std::size_t done = 0;
    while (done < data.size()) {
        const ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw SysError("write(" + path.string() + ")", errno);
        done += static_cast<std::size_t>(n);
    }
    if (::fchmod(fd.get(), mode) != 0) throw SysError("fchmod(" + path.string() + ")", errno);
}

void make_dir(const fs::path& dir, mode_t mode) {
    if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST)
        throw SysError("mkdir(" + dir.string() + ")", errno);
}

// The store, opened once: its directory and staging/'s, each checked trusted (the caller's,
// writable by nobody else; env_store::open_trusted) as it is opened without following a link.
struct Store {
    fs::path path;
    sys::UniqueFd root;
    sys::UniqueFd staging;
};

// The directory `name` of `at`, made (mode `mode`) when missing, then opened trusted. Only a
// directory made here is chmod'ed (through its descriptor: the umask narrowed its mode).
sys::UniqueFd trusted_dir(int at, const std::string& name, const fs::path& path, mode_t mode) {
    const bool made = ::mkdirat(at, name.c_str(), 0700) == 0;
    if (!made && errno != EEXIST) throw SysError("mkdir(" + path.string() + ")", errno);
    sys::UniqueFd fd = env_store::open_trusted(at, name, path);
    if (made && ::fchmod(fd.get(), mode) != 0)
        throw SysError("chmod(" + path.string() + ")", errno);
    return fd;
}

// The store's directories: readable by everyone (a root's run reads as 65534), writable by
// the caller only. staging/ cannot be listed: a build's directory there is entered by the name
// only the builder knows (the sandbox's uid opens its workdir by path); locks/ is private.
// A store, or a directory of it, that another user could write is refused: they could plant an
// environment, or a link that turns root's mkdir, chmod or removal onto a directory of theirs.
Store prepare_store(const fs::path& store) {
    std::error_code ec;
    fs::create_directories(store.parent_path(), ec);  // the caller's own path to it
    if (ec) throw SysError("mkdir(" + store.parent_path().string() + ")", ec.value());
    Store opened{store, trusted_dir(AT_FDCWD, store.string(), store, 0755), {}};
    const int root = opened.root.get();
    trusted_dir(root, "envs", store / "envs", 0755);
    trusted_dir(root, "requests", store / "requests", 0755);
    trusted_dir(root, "locks", store / "locks", 0700);
    opened.staging = trusted_dir(root, "staging", store / "staging", 0711);
    // A staging/ made 0700 by an older pysandbox: the caller's own (checked just above), so
    // widened through its descriptor, never a path.
    struct stat st {};
    if (::fstat(opened.staging.get(), &st) == 0 && st.st_uid == ::geteuid() &&
        (st.st_mode & 0777) != 0711 && ::fchmod(opened.staging.get(), 0711) != 0)
        throw SysError("chmod(" + (store / "staging").string() + ")", errno);
    return opened;
}

// staging/ itself, flock'ed: shared while a directory is made and locked in it, exclusive while
// clean_staging looks for unlocked ones (so it never takes one between its mkdir and its lock).
// A new open file description of the one the store opened (flock locks belong to one).
sys::UniqueFd lock_staging(const Store& store, int how) {
    const fs::path staging = store.path / "staging";
    sys::UniqueFd fd(
        ::openat(store.staging.get(), ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) throw SysError("open(" + staging.string() + ")", errno);
    while (::flock(fd.get(), how) != 0)
        if (errno != EINTR) throw SysError("flock(" + staging.string() + ")", errno);
    return fd;
}

// A directory of staging/ under a name of 128 random bits, the caller's alone, flock'ed by its
// maker while it lives and removed with everything in it when it goes; what a killed maker left
// is unlocked, and the next `env create` removes it (clean_staging).
struct Staging {
    fs::path dir;
    sys::UniqueFd lock;
    sys::UniqueFd parent;  // staging/
    std::string name;
    Staging(const Store& store, std::string_view kind)
        : parent(lock_staging(store, LOCK_SH)),
          name(std::string(kind) + "-" + encoding::random_hex(16)) {
        dir = store.path / "staging" / name;
        if (::mkdirat(parent.get(), name.c_str(), 0700) != 0)
            throw SysError("mkdir(" + dir.string() + ")", errno);
        lock.reset(
            ::openat(parent.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!lock || ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0)
            throw SysError("open/flock(" + dir.string() + ")", errno);
        ::flock(parent.get(), LOCK_UN);  // made and locked: clean_staging may look again
    }
    ~Staging() { sys::remove_tree_at(parent.get(), name); }
    Staging(const Staging&) = delete;
    Staging& operator=(const Staging&) = delete;
};

// What builds and removals that were killed halfway left in staging/: each directory nobody
// holds locked. Never read, only removed (a later request builds again).
// Removed beneath staging/'s descriptor (sys::remove_tree_at), never by a path a link could turn.
void clean_staging(const Store& store) {
    const sys::UniqueFd staging = lock_staging(store, LOCK_EX);
    for (const std::string& name : sys::sorted_names(staging.get())) {
        const sys::UniqueFd entry(
            ::openat(staging.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
        if (entry && ::flock(entry.get(), LOCK_EX | LOCK_NB) != 0) continue;  // in use
        sys::remove_tree_at(staging.get(), name);
    }
}

// flock held for the life of the object: one build per request at a time.
struct BuildLock {
    sys::UniqueFd fd;
    explicit BuildLock(const fs::path& path)
        : fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) {
        if (!fd) throw SysError("open(" + path.string() + ")", errno);
        while (::flock(fd.get(), LOCK_EX) != 0)
            if (errno != EINTR) throw SysError("flock(" + path.string() + ", LOCK_EX)", errno);
    }
};

// The environment a request made before, if it is still there.
std::optional<std::string> cached(const fs::path& store, const std::string& key) {
    HostFile file = read_host_file((store / "requests" / key).string(), 128, O_NOFOLLOW);
    if (file.problem != HostFile::Problem::none) return std::nullopt;
    const std::string id = trim(file.data);
    std::error_code ec;
    if (!env_store::is_full_id(id) ||
        !fs::is_regular_file(env_store::env_dir(store, id) / "env.json", ec))
        return std::nullopt;
    env_store::check_env_trusted(store, id);  // reused only when nobody else could change it
    return id;
}

struct Tree {
    std::string sha256;  // of every path, type, mode and content
    std::uint64_t size = 0;
    std::uint64_t files = 0;
};

constexpr int kMaxDepth = 128;  // directories within an environment

// An environment's tree, walked through descriptors opened without following links, each
// directory's entries in name order. Its listing (every path, type, the executable bit, each
// file's SHA-256) is what the ID hashes.
class TreeWalk {
  public:
    // `build`: the tree just copied out of the install's sandbox, about to be published. It is
    // verified (only directories and regular files, each file one link, all the caller's: what
    // the copy made, and nothing a host process slipped in) and made read-only for all but the
    // caller. Otherwise (`env show --verify`) it is only read.
    // `budget`: at most this many bytes are read (a build's --max-size). A file's apparent size
    // is what reading it costs, and a sparse file's is free to make: it is checked first.
    explicit TreeWalk(bool build, std::uint64_t budget = UINT64_MAX)
        : build_(build), budget_(budget) {}

    Tree hash(const fs::path& site) {
        const sys::UniqueFd root(
            ::open(site.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!root) throw SysError("open(" + site.string() + ", O_DIRECTORY|O_NOFOLLOW)", errno);
        check(root.get(), site.string(), true);
        walk(root.get(), "", 0);
        tree_.sha256 = Sha256::of(listing_);
        return tree_;
    }

  private:
    // Refuses what a build must not publish; fixes the mode of what it may.
    void check(int fd, const std::string& where, bool directory) const {
        struct stat st {};
        if (::fstat(fd, &st) != 0) throw SysError("fstat(" + where + ")", errno);
        if (!build_) return;
        if (st.st_uid != ::geteuid())
            throw UsageError(where + ": owned by uid " + std::to_string(st.st_uid) +
                             ", not by pysandbox's caller: refused, not published");
        if (!directory && st.st_nlink != 1)
            throw UsageError(where + ": a file with " + std::to_string(st.st_nlink) +
                             " links: refused, not published");
        const bool executable = directory || (st.st_mode & 0111) != 0;
        if (::fchmod(fd, executable ? 0755 : 0644) != 0)
            throw SysError("fchmod(" + where + ")", errno);
    }

    void walk(int dir, const std::string& prefix, int depth) {
        if (depth > kMaxDepth)
            throw UsageError(prefix + ": deeper than " + std::to_string(kMaxDepth) + " levels");
        for (const std::string& name : sys::sorted_names(dir)) {
            const std::string rel = prefix + name;
            struct stat st {};
            if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
                throw SysError("fstatat(" + rel + ")", errno);
            if (S_ISDIR(st.st_mode)) {
                const sys::UniqueFd sub(
                    ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
                if (!sub) throw SysError("openat(" + rel + ", O_DIRECTORY|O_NOFOLLOW)", errno);
                check(sub.get(), rel, true);
                listing_ += "d " + rel + "\n";
                walk(sub.get(), rel + "/", depth + 1);
            } else if (S_ISREG(st.st_mode)) {
                const sys::UniqueFd file(
                    ::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
                if (!file) throw SysError("openat(" + rel + ", O_NOFOLLOW)", errno);
                struct stat now {};
                if (::fstat(file.get(), &now) != 0 || !S_ISREG(now.st_mode))
                    throw UsageError(rel + ": changed while it was read: refused");
                check(file.get(), rel, false);
                if (static_cast<std::uint64_t>(now.st_size) > budget_ - tree_.size)
                    throw UsageError(
                        rel + ": " + units::format_size(static_cast<std::uint64_t>(now.st_size)) +
                        " to read (a sparse file counts whole) is more than "
                        "--max-size " +
                        units::format_size(budget_) + " leaves: refused, not published");
                listing_ += std::string((now.st_mode & 0111) != 0 ? "x " : "f ") + rel + " " +
                            digest(file.get(), rel) + "\n";
                ++tree_.files;
            } else {
                throw UsageError(rel +
                                 ": neither a file nor a directory (a link, a device, a "
                                 "FIFO or a socket): refused");
            }
        }
    }

    std::string digest(int fd, const std::string& where) {
        Sha256 hash;
        std::array<char, 1 << 16> buffer{};
        for (;;) {
            const ssize_t n = ::read(fd, buffer.data(), buffer.size());
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) throw SysError("read(" + where + ")", errno);
            if (n == 0) break;
            hash.update(buffer.data(), static_cast<std::size_t>(n));
            tree_.size += static_cast<std::uint64_t>(n);
            if (tree_.size > budget_)  // grown since it was checked
                throw UsageError(where + ": more than --max-size " + units::format_size(budget_) +
                                 ": refused, not published");
        }
        return hash.hex_digest();
    }

    bool build_;
    std::uint64_t budget_;
    Tree tree_;
    std::string listing_;
};

// NAME and VERSION of each *.dist-info/METADATA in `site`.
nlohmann::ordered_json distributions(const fs::path& site) {
    std::vector<std::pair<std::string, std::string>> found;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(site, ec)) {
        if (!entry.path().filename().string().ends_with(".dist-info")) continue;
        HostFile meta = read_host_file((entry.path() / "METADATA").string(), kTextCap, O_NOFOLLOW);
        std::istringstream lines(meta.data);
        std::string line, name, version;
        while (std::getline(lines, line) && !trim(line).empty()) {
            if (line.starts_with("Name:")) name = trim(line.substr(5));
            if (line.starts_with("Version:")) version = trim(line.substr(8));
        }
        if (!name.empty()) found.emplace_back(name, version);
    }
    std::ranges::sort(found);
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& [name, version] : found)
        list.push_back({{"name", name}, {"version", version}});
    return list;
}

// The install's sandbox: the default profile's walls, pip's limits, the index alone reachable.
Profile install_profile(const EnvInvocation& invocation, const std::string& index) {
    Profile profile = load_profile("default", profile_search_dirs());
    Limits& limits = profile.limits;
    limits.wall_time = limits.cpu_time = invocation.timeout;
    limits.memory = std::max<std::uint64_t>(limits.memory, 1ULL << 30);
    limits.tmp_size = limits.file_size = invocation.max_size;
    limits.open_files = std::max<std::uint64_t>(limits.open_files, 1024);
    limits.cpus = std::max<std::uint64_t>(limits.cpus, 2);
    profile.network = {};
    if (!index.empty()) {
        profile.network.mode = NetMode::proxy;
        profile.network.allow.add(index_rule(index));
        if (index == kDefaultIndex)
            profile.network.allow.add(proxy::parse_allow_rule("files.pythonhosted.org:443"));
    }
    // pip runs subprocesses only to build; the kernel's walls are the boundary, not the hook.
    profile.policy.deny_calls.clear();
    profile.policy.deny_imports.clear();
    profile.requirements.clear();  // the caller's default profile may name some: not pip's
    profile.seccomp.allow_processes = invocation.allow_build;
    return profile;
}

std::vector<std::string> pip_arguments(const EnvInvocation& invocation, const std::string& index,
                                       std::size_t houses) {
    const std::string work(kWorkDir);
    std::vector<std::string> args = {"install",
                                     "--target",
                                     work + "/" + std::string(kSiteName),
                                     "--no-cache-dir",
                                     "--disable-pip-version-check",
                                     "--no-input",
                                     "--no-compile",
                                     "--progress-bar",
                                     "off",
                                     "--root-user-action",
                                     "ignore"};
    if (invocation.allow_build)
        args.emplace_back("--no-build-isolation");  // Debian's setuptools, not a download
    else
        args.insert(args.end(), {"--only-binary", ":all:"});
    // Without an index the sandbox has no network either (install_profile): a requirement given
    // as a URL fails at once, not after pip's 5 retries and their 8 s of backoff.
    if (index.empty())
        args.insert(args.end(), {"--no-index", "--retries", "0"});
    else
        args.insert(args.end(), {"--index-url", index});
    for (std::size_t i = 0; i < houses; ++i)
        args.insert(args.end(), {"--find-links",
                                 work + "/" + std::string(kLinksName) + "/" + std::to_string(i)});
    args.insert(args.end(), {"-r", work + "/" + std::string(kRequirementsName)});
    return args;
}

// pip's first ERROR line names the package that failed.
std::string first_error(const std::string& output) {
    std::istringstream lines(output);
    std::string line;
    while (std::getline(lines, line))
        if (line.starts_with("ERROR:")) return trim(line.substr(6));
    return {};
}

std::string describe_end(const Outcome& outcome) {
    switch (outcome.kind) {
        case Outcome::Kind::exited: return "pip exited " + std::to_string(outcome.exit_code);
        case Outcome::Kind::timeout: return "the install ran past --timeout";
        case Outcome::Kind::signaled: return "pip was killed by " + signal_name(outcome.signal);
        default: return "the install's sandbox ended early";
    }
}

// The result of an install that failed: with --json a pysandbox.result/v1 object of status
// install_error (pysandbox(1), JSON RESULT), and on stderr the message and pip's last lines.
InstallFailure install_error(const EnvInvocation& invocation, const std::vector<std::string>& specs,
                             const Outcome& outcome) {
    std::string output;
    if (outcome.captured) output = outcome.captured->stdout_text + outcome.captured->stderr_text;
    std::string message = describe_end(outcome);
    if (const std::string error = first_error(output); !error.empty()) message += ": " + error;
    std::vector<std::string> denied;
    for (const auto& [destination, count] : outcome.blocked_connections)
        denied.push_back(destination);
    const std::string output_tail = tail(output, kTailLines);
    if (invocation.json) {
        const nlohmann::ordered_json result = {
            {"schema", kResultSchema},
            {"version", kVersion},
            {"status", "install_error"},
            {"pysandbox_exit_code", exit_codes::kInstallError},
            {"message", message},
            {"install",
             {{"requested", specs}, {"output_tail", output_tail}, {"denied_connections", denied}}}};
        write_line(result, std::cout);
    }
    std::cerr << "pysandbox: install_error: " << message << "\n" << output_tail;
    if (!output_tail.empty() && output_tail.back() != '\n') std::cerr << "\n";
    for (const std::string& destination : denied)
        std::cerr << "pysandbox: the install tried to reach " << destination
                  << ", which is not the index (--index-url)\n";
    return {exit_codes::kInstallError, message + "\n" + output_tail};
}

// Stages the request, runs pip inside, and publishes what it made. Returns the ID, or the
// install_error.
std::variant<std::string, InstallFailure> build(const EnvInvocation& invocation,
                                                const Store& opened,
                                                const std::vector<std::string>& specs,
                                                const std::vector<std::vector<Link>>& houses,
                                                const std::string& index,
                                                const std::vector<std::string>& host_env) {
    // Nothing here is ever the sandbox's on the host: pip writes only into its overlay (the
    // workdir stays the caller's), and what it wrote comes back as the caller's plain files.
    const fs::path& store = opened.path;
    Staging staging(opened, "build");
    if (::geteuid() == 0 && ::chmod(staging.dir.c_str(), 0711) != 0)
        throw SysError("chmod(" + staging.dir.string() + ")", errno);  // 65534 opens work/ by path
    const fs::path work = staging.dir / "work";
    make_dir(work, 0755);
    std::string requirements;
    for (const std::string& spec : specs) requirements += spec + "\n";
    write_file(work / kRequirementsName, requirements, 0644);
    make_dir(work / kLinksName, 0755);
    for (std::size_t i = 0; i < houses.size(); ++i) {
        const fs::path dir = work / kLinksName / std::to_string(i);
        make_dir(dir, 0755);
        for (const Link& link : houses[i]) write_file(dir / link.name, link.data, 0644);
    }

    Request request;
    request.program.kind = Program::Kind::code;
    request.program.text = kPipMain;
    request.program.args = pip_arguments(invocation, index, houses.size());
    request.overrides.workdir = work.string();
    request.overrides.workdir_stays_callers = true;
    request.capture_output = true;
    request.pass_stdin = false;  // the caller's stdin is the script's (run) or the cells' (session)
    request.verbose = invocation.verbose;
    Profile profile = install_profile(invocation, index);
    std::unique_ptr<const Plan> plan = make_plan(std::move(profile), request, host_env);
    if (invocation.verbose)
        say("installing " + std::to_string(specs.size()) + " requirement(s) with pip inside a " +
            "sandbox (" +
            (index.empty() ? "no network"
                           : "network: the proxy to " + plan->profile.network.allow.describe()) +
            ")");
    Outcome outcome = execute(*plan);
    if (invocation.verbose && outcome.captured)
        std::cerr << outcome.captured->stdout_text << outcome.captured->stderr_text;
    if (outcome.kind != Outcome::Kind::exited || outcome.exit_code != 0)
        return install_error(invocation, specs, outcome);

    const fs::path final_dir = staging.dir / "final";
    make_dir(final_dir, 0700);
    const fs::path site = final_dir / "site";
    std::error_code ec;
    if (fs::is_directory(work / kSiteName, ec))
        fs::rename(work / kSiteName, site);
    else
        make_dir(site, 0755);  // pip installed nothing new: an empty environment
    const Tree tree = TreeWalk(true, invocation.max_size).hash(site);
    const std::string id = Sha256::of("pysandbox-env/1\n" +
                                      interpreter_identity(plan->interpreter) + tree.sha256 + "\n");
    const auto now = std::chrono::system_clock::now();
    nlohmann::ordered_json meta = {
        {"id", id},
        {"created",
         std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count()},
        {"interpreter", plan->interpreter},
        {"platform", platform()},
        {"requested", specs},
        {"index_url", index},
        {"find_links", invocation.find_links},
        {"allow_build", invocation.allow_build},
        {"distributions", distributions(site)},
        {"files", tree.files},
        {"size", tree.size},
        {"tree_sha256", tree.sha256},
    };
    write_file(final_dir / "env.json", meta.dump(2) + "\n", 0644);
    if (::chmod(final_dir.c_str(), 0755) != 0)
        throw SysError("chmod(" + final_dir.string() + ")", errno);
    // One rename publishes it; an equal one already there is the same content.
    if (::rename(final_dir.c_str(), env_store::env_dir(store, id).c_str()) != 0 &&
        errno != EEXIST && errno != ENOTEMPTY)
        throw SysError(
            "rename(" + final_dir.string() + ", " + env_store::env_dir(store, id).string() + ")",
            errno);
    return id;
}

void remember(const fs::path& store, const std::string& key, const std::string& id) {
    const fs::path tmp = store / "requests" / (key + ".tmp");
    std::error_code ec;
    fs::remove(tmp, ec);
    write_file(tmp, id + "\n", 0644);
    if (::rename(tmp.c_str(), (store / "requests" / key).c_str()) != 0)
        throw SysError("rename(" + tmp.string() + ")", errno);
}

nlohmann::ordered_json read_meta(const fs::path& store, const std::string& id) {
    const fs::path path = env_store::env_dir(store, id) / "env.json";
    HostFile file = read_host_file(path.string(), kTextCap, O_NOFOLLOW);
    if (file.problem != HostFile::Problem::none)
        throw UsageError(path.string() + ": cannot be read");
    try {
        return nlohmann::ordered_json::parse(file.data);
    } catch (const nlohmann::json::exception& e) {
        throw UsageError(path.string() + ": " + e.what());
    }
}

std::string packages_line(const nlohmann::ordered_json& meta) {
    std::string line;
    for (const auto& dist : meta.value("distributions", nlohmann::ordered_json::array()))
        line +=
            (line.empty() ? "" : " ") + dist.value("name", "?") + "==" + dist.value("version", "?");
    return line.empty() ? "(empty)" : line;
}

std::string created_text(const nlohmann::ordered_json& meta) {
    const std::time_t when = meta.value("created", std::int64_t{0});
    char text[32];
    std::tm tm{};
    ::gmtime_r(&when, &tm);
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return text;
}

// Moves the environment out of envs/ first, so a run never finds it half removed.
void remove_env(const Store& opened, const std::string& id) {
    const fs::path& store = opened.path;
    const fs::path dir = env_store::env_dir(store, id);
    const Staging trash(opened, "rm");
    if (::rename(dir.c_str(), (trash.dir / "env").c_str()) != 0)
        throw SysError("rename(" + dir.string() + ")", errno);
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(store / "requests", ec)) {
        HostFile file = read_host_file(entry.path().string(), 128, O_NOFOLLOW);
        if (trim(file.data) == id) fs::remove(entry.path(), ec);
    }
}

}  // namespace

std::string tail(const std::string& text, std::size_t lines) {
    std::size_t at = text.size();
    if (at > 0 && text[at - 1] == '\n') --at;
    for (std::size_t n = 0; at > 0; --at)
        if (text[at - 1] == '\n' && ++n == lines) break;
    return text.substr(at);
}

void check_requirement(const std::string& spec, const std::string& origin) {
    if (spec.empty() || is_option(spec) || spec.find_first_of("\n\r") != std::string::npos)
        throw UsageError(origin + ": \"" + spec +
                         "\" is not a requirement (pip options go on the command line: "
                         "--index-url, --find-links, --allow-build)");
}

namespace {

// PEP 723's requires-python, judged by the sandbox's interpreter itself, inside a sandbox of the
// run's profile: packaging's SpecifierSet (pip's copy when python3-packaging is absent) against
// platform.python_version(). Exit 1: not allowed; 3: not a specifier.
constexpr std::string_view kRequiresPythonCheck =
    "import platform, sys\n"
    "try:\n"
    "    from packaging.specifiers import InvalidSpecifier, SpecifierSet\n"
    "except ImportError:\n"
    "    from pip._vendor.packaging.specifiers import InvalidSpecifier, SpecifierSet\n"
    "version = platform.python_version()\n"
    "print(version)\n"
    "try:\n"
    "    allowed = SpecifierSet(sys.argv[1]).contains(version, prereleases=True)\n"
    "except InvalidSpecifier:\n"
    "    sys.exit(3)\n"
    "sys.exit(0 if allowed else 1)\n";

// A script whose metadata names a requires-python its interpreter does not satisfy is refused
// (UsageError, exit 125) before anything is installed or run, as uv refuses it.
void check_requires_python(Profile profile, const env_store::InlineMetadata& metadata,
                           const std::vector<std::string>& host_env) {
    if (metadata.requires_python.empty()) return;
    Request request;
    request.program = {
        Program::Kind::code, std::string(kRequiresPythonCheck), {metadata.requires_python}};
    request.capture_output = true;
    request.pass_stdin = false;
    profile.requirements.clear();  // the check needs no packages: the interpreter alone
    profile.policy.deny_calls.clear();
    profile.policy.deny_imports.clear();
    profile.network = {};
    const std::unique_ptr<const Plan> plan = make_plan(std::move(profile), request, host_env);
    const Outcome outcome = execute(*plan);
    const std::string version =
        outcome.captured ? trim(outcome.captured->stdout_text) : std::string();
    const std::string wanted =
        metadata.requires_python_at + ": requires-python \"" + metadata.requires_python + "\"";
    if (outcome.kind == Outcome::Kind::exited && outcome.exit_code == 0) return;
    if (outcome.kind == Outcome::Kind::exited && outcome.exit_code == 1)
        throw UsageError(wanted + " is not satisfied by the sandbox's interpreter, " +
                         plan->interpreter + " (Python " + version +
                         "); nothing was installed or run. Use a profile whose [python] "
                         "interpreter it allows");
    if (outcome.kind == Outcome::Kind::exited && outcome.exit_code == 3)
        throw UsageError(wanted + " is not a version specifier (PEP 440), such as \">=3.10\"");
    std::string detail = describe_end(outcome);
    if (outcome.captured) detail += "\n" + tail(outcome.captured->stderr_text, kTailLines);
    throw UsageError(wanted + ": the sandbox's interpreter could not check it (" + detail + ")");
}

// Everything asked for, in the order given.
std::vector<std::string> requested(const EnvInvocation& invocation,
                                   const std::vector<std::string>& host_env) {
    std::vector<std::string> specs;
    for (const std::string& spec : invocation.specs) {
        check_requirement(spec, "PKG");
        specs.push_back(spec);
    }
    for (const std::string& file : invocation.requirement_files)
        for (std::string& spec : requirements_file(file, "-r")) specs.push_back(std::move(spec));
    if (!invocation.script.empty()) {
        auto metadata =
            env_store::inline_metadata(read_text(invocation.script, "--script"), invocation.script);
        if (!metadata)
            throw UsageError("--script: " + invocation.script +
                             " has no inline metadata (a `# /// script` block, PEP 723)");
        check_requires_python(load_profile("default", profile_search_dirs()), *metadata, host_env);
        for (std::string& spec : metadata->dependencies) {
            check_requirement(spec, invocation.script);
            specs.push_back(std::move(spec));
        }
    }
    if (specs.empty()) throw UsageError("env create: nothing to install");
    return specs;
}

struct Obtained {
    std::string id;
    bool reused = false;
};

// The environment of `specs`: the one the same request made before (pip not run), or a new one
// (`announce`: said on stderr first, as `uv run` says what it installs). An install that failed
// is reported, and returned.
std::variant<Obtained, InstallFailure> obtain(const EnvInvocation& invocation,
                                              const std::vector<std::string>& specs,
                                              const std::vector<std::string>& host_env,
                                              bool announce) {
    const std::vector<std::vector<Link>> houses = read_wheelhouses(invocation);
    const std::string index = index_of(invocation);
    if (!index.empty()) index_rule(index);  // a bad URL is a usage error before anything else
    const fs::path store = env_store::store_dir(invocation.cache_dir, host_env);
    const std::string interpreter = load_profile("default", profile_search_dirs()).interpreter;
    const std::string key = request_key(interpreter, specs, houses, index, invocation.allow_build);
    const Store opened = prepare_store(store);
    clean_staging(opened);
    BuildLock lock(store / "locks" / (key + ".lock"));
    if (std::optional<std::string> id = cached(store, key)) return Obtained{*id, true};
    if (announce) {
        std::string names;
        for (const std::string& spec : specs) names += (names.empty() ? "" : ", ") + spec;
        say("installing " + names + " (pip, inside a sandbox, from " +
            (index.empty() ? "--find-links" : index) + ") into a new environment in " +
            store.string() + "; later runs reuse it");
    }
    auto built = build(invocation, opened, specs, houses, index, host_env);
    if (auto* failed = std::get_if<InstallFailure>(&built)) return std::move(*failed);
    remember(store, key, std::get<std::string>(built));
    return Obtained{std::get<std::string>(built), false};
}

}  // namespace

int create(const EnvInvocation& invocation, const std::vector<std::string>& host_env) {
    auto obtained = obtain(invocation, requested(invocation, host_env), host_env, false);
    if (const auto* failed = std::get_if<InstallFailure>(&obtained)) return failed->exit_code;
    const auto& [id, reused] = std::get<Obtained>(obtained);
    if (invocation.json) {
        const fs::path store = env_store::store_dir(invocation.cache_dir, host_env);
        nlohmann::ordered_json meta = read_meta(store, id);
        meta["status"] = "ok";
        meta["reused"] = reused;
        write_line(meta, std::cout);
    } else {
        std::cout << id << "\n";
    }
    if (invocation.verbose)
        say(reused ? "the same request made it before: reused, pip not run" : "created");
    return 0;
}

std::optional<int> run_packages(const EnvInvocation& packages, const Profile& profile,
                                Request& request, const std::vector<std::string>& host_env) {
    std::vector<std::string> specs = profile.requirements;
    if (request.program.kind == Program::Kind::script_file) {
        // A script that cannot be read is the plan's to refuse, in its words (plan/program.cpp),
        // as `check` leaves it.
        const std::string& path = request.program.text;
        if (HostFile text = read_host_file(path, kTextCap); text.problem == HostFile::Problem::none)
            if (auto metadata = env_store::inline_metadata(text.data, path)) {
                check_requires_python(profile, *metadata, host_env);  // --with-env or not
                for (std::string& spec : metadata->dependencies) {
                    check_requirement(spec, path);
                    specs.push_back(std::move(spec));
                }
            }
    }
    if (request.overrides.packages) return std::nullopt;  // --with-env names it
    for (const std::string& spec : packages.specs) {
        check_requirement(spec, "--with");
        specs.push_back(spec);
    }
    for (const std::string& file : packages.requirement_files)
        for (std::string& spec : requirements_file(file, "--requirements"))
            specs.push_back(std::move(spec));
    if (specs.empty()) return std::nullopt;
    EnvInvocation install = packages;
    if (install.find_links.empty() && install.index_url.empty()) {
        install.find_links = profile.find_links;
        install.index_url = profile.index_url;
    }
    install.cache_dir = request.overrides.cache_dir;
    install.json = request.capture_output;
    install.verbose = request.verbose;
    auto obtained = obtain(install, specs, host_env, true);
    if (const auto* failed = std::get_if<InstallFailure>(&obtained)) return failed->exit_code;
    request.overrides.packages = std::get<Obtained>(obtained).id;
    return std::nullopt;
}

std::variant<ProfileEnvironments, InstallFailure> profile_environments(
    std::span<const std::string> profiles, const Overrides& overrides, int verbose,
    const std::vector<std::string>& host_env) {
    ProfileEnvironments environments;
    if (overrides.packages) return environments;  // --with-env: one for every profile
    for (const std::string& name : profiles) {
        if (environments.contains(name)) continue;
        const Profile profile = load_profile(name, profile_search_dirs());
        if (profile.requirements.empty()) continue;
        EnvInvocation install;
        install.find_links = profile.find_links;
        install.index_url = profile.index_url;
        install.cache_dir = overrides.cache_dir;
        install.verbose = verbose;
        auto obtained = obtain(install, profile.requirements, host_env, true);
        if (auto* failed = std::get_if<InstallFailure>(&obtained)) return std::move(*failed);
        environments.emplace(name, std::get<Obtained>(obtained).id);
    }
    return environments;
}

std::optional<int> profile_packages(const std::string& profile, Overrides& overrides, int verbose,
                                    const std::vector<std::string>& host_env) {
    auto environments = profile_environments(std::span(&profile, 1), overrides, verbose, host_env);
    if (const auto* failed = std::get_if<InstallFailure>(&environments)) return failed->exit_code;
    for (const auto& [name, id] : std::get<ProfileEnvironments>(environments))
        overrides.packages = id;
    return std::nullopt;
}

int list(const EnvInvocation& invocation, const std::vector<std::string>& host_env) {
    const fs::path store = env_store::store_dir(invocation.cache_dir, host_env);
    for (const std::string& id : env_store::list_ids(store)) {
        const nlohmann::ordered_json meta = read_meta(store, id);
        if (invocation.json) {
            write_line(meta, std::cout);
            continue;
        }
        std::cout << id.substr(0, 12) << "  " << created_text(meta) << "  "
                  << units::format_size(meta.value("size", std::uint64_t{0})) << "  "
                  << packages_line(meta) << "\n";
    }
    return 0;
}

int show(const EnvInvocation& invocation, const std::vector<std::string>& host_env) {
    const fs::path store = env_store::store_dir(invocation.cache_dir, host_env);
    const std::string id = env_store::resolve_id(store, invocation.ids.front());
    nlohmann::ordered_json meta = read_meta(store, id);
    bool intact = true;
    if (invocation.verify) {
        const Tree tree = TreeWalk(false).hash(env_store::site_dir(store, id));
        const std::string again =
            Sha256::of("pysandbox-env/1\n" + interpreter_identity(meta.value("interpreter", "")) +
                       tree.sha256 + "\n");
        intact = tree.sha256 == meta.value("tree_sha256", "") && again == id;
        meta["verified"] = intact;
    }
    meta["path"] = env_store::env_dir(store, id).string();
    if (invocation.json) {
        write_line(meta, std::cout);
    } else {
        std::cout << "id: " << id << "\ncreated: " << created_text(meta)
                  << "\npath: " << meta["path"].get<std::string>()
                  << "\ninterpreter: " << meta.value("interpreter", "")
                  << "\nplatform: " << meta.value("platform", "")
                  << "\nsize: " << units::format_size(meta.value("size", std::uint64_t{0}))
                  << " in " << meta.value("files", std::uint64_t{0})
                  << " files\npackages: " << packages_line(meta) << "\nmade from:";
        for (const auto& spec : meta.value("requested", nlohmann::ordered_json::array()))
            std::cout << " " << spec.get<std::string>();
        if (const std::string index = meta.value("index_url", ""); !index.empty())
            std::cout << "\nindex: " << index;
        for (const auto& dir : meta.value("find_links", nlohmann::ordered_json::array()))
            std::cout << "\nfind-links: " << dir.get<std::string>();
        std::cout << "\n";
        if (invocation.verify)
            std::cout << (intact ? "verified: every file is what the ID says\n"
                                 : "NOT verified: the files differ from what the ID says\n");
    }
    return intact ? 0 : 1;
}

int remove(const EnvInvocation& invocation, const std::vector<std::string>& host_env) {
    const fs::path store = env_store::store_dir(invocation.cache_dir, host_env);
    std::vector<std::string> ids;
    for (const std::string& given : invocation.ids)
        ids.push_back(env_store::resolve_id(store, given));  // all checked before any is removed
    const Store opened = prepare_store(store);
    for (const std::string& id : ids) remove_env(opened, id);
    return 0;
}

int prune(const EnvInvocation& invocation, const std::vector<std::string>& host_env) {
    const fs::path store = env_store::store_dir(invocation.cache_dir, host_env);
    struct Entry {
        std::int64_t created;
        std::uint64_t size;
        std::string id;
    };
    std::vector<Entry> entries;
    for (const std::string& id : env_store::list_ids(store)) {
        const nlohmann::ordered_json meta = read_meta(store, id);
        entries.push_back(
            {meta.value("created", std::int64_t{0}), meta.value("size", std::uint64_t{0}), id});
    }
    if (entries.empty()) return 0;
    const Store opened = prepare_store(store);
    std::ranges::sort(entries, {}, &Entry::created);  // oldest first
    const std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
    std::uint64_t total = 0;
    for (const Entry& entry : entries) total += entry.size;
    for (const Entry& entry : entries) {
        const bool old =
            invocation.older_than &&
            now - entry.created >
                std::chrono::duration_cast<std::chrono::seconds>(*invocation.older_than).count();
        const bool over = invocation.keep_size && total > *invocation.keep_size;
        if (!old && !over) continue;
        remove_env(opened, entry.id);
        total -= entry.size;
        std::cout << "removed " << entry.id.substr(0, 12) << "\n";
    }
    return 0;
}

}  // namespace pysandbox::env
