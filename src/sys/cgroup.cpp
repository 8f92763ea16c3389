#include "sys/cgroup.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "sys/errors.hpp"

namespace pysandbox::cgroup {
namespace fs = std::filesystem;
namespace {

constexpr std::uint64_t kCpuPeriodUs = 100000;

std::set<std::string> read_words(const fs::path& file) {
    std::ifstream in(file);
    std::set<std::string> words;
    for (std::string word; in >> word;) words.insert(word);
    return words;
}

// The unified hierarchy's line, "0::/user.slice/...", of /proc/self/cgroup.
std::optional<std::string> unified_path(std::string_view proc_self_cgroup) {
    std::istringstream in{std::string(proc_self_cgroup)};
    for (std::string line; std::getline(in, line);)
        if (line.starts_with("0::/")) return line.substr(3);
    return std::nullopt;
}

int write_file_at(int dir_fd, const char* name, const std::string& value) {
    sys::UniqueFd fd(::openat(dir_fd, name, O_WRONLY | O_TRUNC | O_CLOEXEC));
    if (!fd) return -errno;
    if (::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size()))
        return -errno;
    return 0;
}

// Unique among concurrent runs of every user: the pid is unique while we live.
std::string run_cgroup_name() {
    static std::atomic<unsigned> counter{0};
    return "pysandbox-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

}  // namespace

fs::path cgroupfs_root() {
    const char* root = std::getenv("PYSANDBOX_CGROUP_ROOT");
    return root != nullptr && *root != '\0' ? fs::path(root) : fs::path("/sys/fs/cgroup");
}

std::variant<Delegation, Unavailable> find_delegation(const fs::path& root,
                                                      std::string_view proc_self_cgroup) {
    std::optional<std::string> own = unified_path(proc_self_cgroup);
    if (!own) return Unavailable("no cgroup v2 hierarchy for this process (cgroup v1 host)");
    fs::path dir = root / fs::path(*own).relative_path();
    std::set<std::string> available = read_words(dir / "cgroup.controllers");
    std::set<std::string> enabled = read_words(dir / "cgroup.subtree_control");
    for (const char* needed : {"memory", "pids"}) {
        if (!available.contains(needed))
            return Unavailable(std::string("the ") + needed + " controller is not delegated to " +
                               dir.string());
        if (!enabled.contains(needed))
            return Unavailable(std::string("the ") + needed +
                               " controller is not enabled for child cgroups of " + dir.string() +
                               " (cgroup.subtree_control)");
    }
    if (::access(dir.c_str(), W_OK) != 0)
        return Unavailable(dir.string() + " is not writable by this user");
    return Delegation{dir, enabled.contains("cpu")};
}

std::variant<Delegation, Unavailable> find_own_delegation() {
    std::ifstream in("/proc/self/cgroup");
    std::string self((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return find_delegation(cgroupfs_root(), self);
}

int write_limits(int dir_fd, const Settings& settings, bool with_cpu, std::string& failed_file) {
    struct Entry {
        const char* file;
        std::string value;
        bool required;
    };
    std::vector<Entry> entries = {
        {"memory.max", std::to_string(settings.memory), true},
        {"memory.swap.max", "0", false},  // absent without swap accounting
        {"pids.max", std::to_string(settings.max_procs), true},
    };
    if (with_cpu)
        entries.push_back(
            {"cpu.max",
             std::to_string(settings.cpus * kCpuPeriodUs) + " " + std::to_string(kCpuPeriodUs),
             true});
    for (const Entry& entry : entries) {
        int rc = write_file_at(dir_fd, entry.file, entry.value);
        if (rc == -ENOENT && !entry.required) continue;
        if (rc != 0) {
            failed_file = entry.file;
            return rc;
        }
    }
    return 0;
}

std::uint64_t read_oom_kills(int dir_fd) {
    sys::UniqueFd fd(::openat(dir_fd, "memory.events", O_RDONLY | O_CLOEXEC));
    if (!fd) return 0;
    char buffer[1024];
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer - 1);
    if (n <= 0) return 0;
    std::istringstream in(std::string(buffer, static_cast<std::size_t>(n)));
    std::string key;
    std::uint64_t value = 0;
    while (in >> key >> value)
        if (key == "oom_kill") return value;
    return 0;
}

RunCgroup::RunCgroup(const Delegation& parent, const Settings& settings)
    : path_(parent.dir / run_cgroup_name()) {
    check_sys(::mkdir(path_.c_str(), 0755), "mkdir(" + path_.string() + ")");
    dir_ = sys::UniqueFd(::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir_) {
        const int error = errno;
        ::rmdir(path_.c_str());
        throw SysError("open(" + path_.string() + ")", error);
    }
    std::string failed;
    if (int rc = write_limits(dir_.get(), settings, parent.cpu, failed); rc != 0) {
        ::rmdir(path_.c_str());
        throw SysError("write(" + (path_ / failed).string() + ")", -rc);
    }
}

RunCgroup::~RunCgroup() {
    // Whatever is still inside dies first (cgroup.kill, Linux 5.14); then the directory can go.
    write_file_at(dir_.get(), "cgroup.kill", "1");
    for (int attempt = 0; attempt < 50; ++attempt) {
        if (::rmdir(path_.c_str()) == 0 || errno != EBUSY) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

}  // namespace pysandbox::cgroup
