#include "engine/artifacts.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "report/encoding.hpp"
#include "sys/dir_names.hpp"
#include "sys/sha256.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox::artifacts {
namespace {

using sys::UniqueFd;

// The tree is the script's: a walk it could make endless or huge stops here.
constexpr int kMaxDepth = 32;
constexpr std::size_t kMaxEntries = 10'000;

using Clock = std::chrono::steady_clock;

struct Budget {
    std::size_t entries = 0;
    std::uint64_t bytes_read = 0;
};

// The host side of one copy. The data goes into an unnamed O_TMPFILE in the output directory and
// gets its name only once complete, through linkat (which never replaces a name): a pysandbox
// killed midway leaves nothing behind, not a truncated file. A filesystem without O_TMPFILE gets
// the named file at once (O_EXCL), removed again if the copy fails.
class HostCopy {
  public:
    // Empty `refusal()` when the copy may start: "exists" or "error" otherwise.
    HostCopy(int dir, std::string name) : dir_(dir), name_(std::move(name)) {
        struct stat st;
        if (::fstatat(dir_, name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
            refusal_ = "exists";
            return;
        }
        fd_.reset(::openat(dir_, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644));
        if (!fd_) {
            named_ = true;
            fd_.reset(::openat(dir_, name_.c_str(),
                               O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
        }
        if (!fd_) refusal_ = errno == EEXIST ? "exists" : "error";
    }
    HostCopy(const HostCopy&) = delete;
    HostCopy& operator=(const HostCopy&) = delete;
    ~HostCopy() {
        if (named_ && fd_ && !published_) ::unlinkat(dir_, name_.c_str(), 0);
    }

    const std::string& refusal() const { return refusal_; }
    int fd() const { return fd_.get(); }

    // Gives the copy to uid:gid (root's runs: the copy is the sandbox's, as the file was).
    void chown(std::optional<uid_t> owner, std::optional<gid_t> group) {
        if (owner) ::fchown(fd_.get(), *owner, group ? *group : static_cast<gid_t>(-1));
    }

    // Gives the complete copy its name. Returns "" or why not ("exists", "error").
    std::string publish() {
        published_ = true;
        if (named_) return "";
        const std::string self = "/proc/self/fd/" + std::to_string(fd_.get());
        if (::linkat(AT_FDCWD, self.c_str(), dir_, name_.c_str(), AT_SYMLINK_FOLLOW) == 0)
            return "";
        published_ = false;
        return errno == EEXIST ? "exists" : "error";
    }

  private:
    int dir_;
    std::string name_;
    UniqueFd fd_;
    std::string refusal_;
    bool named_ = false;
    bool published_ = false;
};

std::int64_t timespec_ns(const timespec& time) {
    return static_cast<std::int64_t>(time.tv_sec) * 1'000'000'000 + time.tv_nsec;
}

bool same_inode(const struct stat& a, const struct stat& b) {
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// Opens `name` in `dir` only if it is still the inode lstat saw and of the wanted type: a name
// swapped for a link or a FIFO in between is refused, never followed or blocked on.
UniqueFd open_checked(int dir, const std::string& name, const struct stat& seen, int flags) {
    UniqueFd fd(
        ::openat(dir, name.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
    struct stat now {};
    if (!fd || ::fstat(fd.get(), &now) != 0 || !same_inode(seen, now) ||
        (now.st_mode & S_IFMT) != (seen.st_mode & S_IFMT))
        return UniqueFd();
    return fd;
}

bool write_all(int fd, const char* data, std::size_t size) {
    while (size > 0) {
        ssize_t n = ::write(fd, data, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

// Whether each component of a path is valid UTF-8: a name that is not cannot be given back in
// JSON as a host path that exists.
bool is_utf8_name(std::string_view name) {
    return encoding::is_utf8(name);
}

class Walker {
  public:
    explicit Walker(const Options& options) : options_(options) {}

    void directory(int dir, int host_dir, const std::string& prefix, int depth) {
        for (const std::string& name : sys::sorted_names(dir)) {
            if (++budget_.entries > kMaxEntries) return;
            if (depth == 0 && std::ranges::find(options_.inputs, name) != options_.inputs.end())
                continue;
            struct stat st {};
            if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
            if (S_ISDIR(st.st_mode) && depth + 1 < kMaxDepth)
                subdirectory(dir, host_dir, name, st, prefix, depth);
            else if (S_ISREG(st.st_mode))
                file(dir, host_dir, name, st, prefix + name);
            // Links, FIFOs, sockets and devices are never artifacts.
        }
    }

    Listing take() { return {std::move(found_), omitted_, std::move(seen_)}; }

  private:
    // The host directory a file or a directory goes into: kHostDirLater becomes the output
    // directory, made now (once) by Options::make_output_dir.
    int host(int host_dir) {
        if (host_dir != kHostDirLater) return host_dir;
        if (!top_) top_ = options_.make_output_dir ? options_.make_output_dir() : kHostDirMissing;
        return *top_;
    }

    // An artifact lands only in a directory this walk made: a directory that is already there
    // (made by someone else since the plan found the output directory empty) is not entered.
    void subdirectory(int dir, int host_dir, const std::string& name, const struct stat& st,
                      const std::string& prefix, int depth) {
        UniqueFd sub = open_checked(dir, name, st, O_RDONLY | O_DIRECTORY);
        if (!sub) return;
        host_dir = host(host_dir);
        UniqueFd host_sub;
        int next = host_dir;
        if (host_dir >= 0) {
            const bool valid = is_utf8_name(name);
            if (valid) host_sub = make_host_dir(host_dir, name, options_.owner, options_.group);
            next = host_sub ? host_sub.get() : kHostDirMissing;
            if (!host_sub)
                refusal_below_ = !valid ? "invalid_name" : errno == EEXIST ? "exists" : "error";
        }
        directory(sub.get(), next, prefix + name + "/", depth + 1);
        if (host_dir >= 0 && !host_sub) refusal_below_.clear();
    }

    // Why the file will not be hashed or copied, or "" when it will be.
    std::string bound_reached(std::uint64_t size) const {
        if (Clock::now() >= options_.deadline) return "time_limit";
        if (size > options_.max_file_size) return "too_large";
        if (budget_.bytes_read + size > options_.max_total_size) return "total_limit";
        return "";
    }

    void file(int dir, int host_dir, const std::string& name, const struct stat& st,
              const std::string& path) {
        const Stamp stamp{st.st_ino, st.st_size, timespec_ns(st.st_mtim), timespec_ns(st.st_ctim)};
        seen_[path] = stamp;
        if (options_.unchanged != nullptr) {
            const auto before = options_.unchanged->find(path);
            if (before != options_.unchanged->end() && before->second == stamp) return;
        }
        if (found_.size() >= kMaxListed) {
            ++omitted_;
            return;
        }
        Artifact artifact{path,         static_cast<std::uint64_t>(st.st_size),
                          std::nullopt, media_type_for(name),
                          std::nullopt, ""};
        host_dir = host(host_dir);
        const bool copying = host_dir != kListOnly;
        const std::string bound = bound_reached(artifact.size);
        if (copying) {
            if (host_dir == kHostDirMissing)
                artifact.skipped = refusal_below_.empty() ? "error" : refusal_below_;
            else if (!is_utf8_name(name))
                artifact.skipped = "invalid_name";
            else
                artifact.skipped = bound;
        }
        if (bound.empty()) {
            std::optional<HostCopy> out;
            if (copying && artifact.skipped.empty()) {
                out.emplace(host_dir, name);
                artifact.skipped = out->refusal();
                if (!artifact.skipped.empty()) out.reset();
            }
            read_file(dir, name, st, out ? &*out : nullptr, artifact);
        }
        found_.push_back(std::move(artifact));
    }

    // Hashes the file and, with `out`, copies it in the same pass, then names the copy.
    void read_file(int dir, const std::string& name, const struct stat& st, HostCopy* out,
                   Artifact& artifact) {
        UniqueFd in = open_checked(dir, name, st, O_RDONLY);
        const std::string why =
            in ? read_through(in.get(), out ? out->fd() : -1, artifact) : std::string("error");
        if (!out) return;
        if (!why.empty()) {
            artifact.skipped = why;
            return;
        }
        out->chown(options_.owner, options_.group);
        artifact.skipped = out->publish();
        if (artifact.skipped.empty())
            artifact.host_path = options_.output_dir_path + "/" + artifact.path;
    }

    // Hashes the file and, when `out` is open, copies it there in the same pass. Returns "" or
    // why the copy is not complete: "time_limit" when the deadline passed midway, "error" when
    // a write failed or the file changed size under the walk.
    std::string read_through(int in, int out, Artifact& artifact) {
        Sha256 hash;
        std::array<char, 65536> buffer;
        std::uint64_t total = 0;
        for (;;) {
            if (Clock::now() >= options_.deadline) return "time_limit";
            ssize_t n = ::read(in, buffer.data(), buffer.size());
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) return "error";
            if (n == 0) break;
            total += static_cast<std::uint64_t>(n);
            budget_.bytes_read += static_cast<std::uint64_t>(n);
            if (total > artifact.size) return "error";  // grew: a host process writes to it
            hash.update(buffer.data(), static_cast<std::size_t>(n));
            if (out >= 0 && !write_all(out, buffer.data(), static_cast<std::size_t>(n)))
                return "error";
        }
        if (total != artifact.size) return "error";
        artifact.sha256 = hash.hex_digest();
        return "";
    }

    const Options& options_;
    Budget budget_;
    std::vector<Artifact> found_;
    std::uint64_t omitted_ = 0;
    std::string refusal_below_;  // why the files below a directory not made here are skipped
    std::optional<int> top_;     // the output directory, once made (kHostDirLater)
    Snapshot seen_;
};

}  // namespace

std::string media_type_for(std::string_view name) {
    static constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
        {".png", "image/png"},
        {".jpg", "image/jpeg"},
        {".jpeg", "image/jpeg"},
        {".gif", "image/gif"},
        {".webp", "image/webp"},
        {".svg", "image/svg+xml"},
        {".pdf", "application/pdf"},
        {".csv", "text/csv"},
        {".tsv", "text/tab-separated-values"},
        {".json", "application/json"},
        {".txt", "text/plain"},
        {".md", "text/markdown"},
        {".html", "text/html"},
        {".htm", "text/html"},
        {".xml", "application/xml"},
        {".py", "text/x-python"},
        {".parquet", "application/vnd.apache.parquet"},
        {".xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
        {".zip", "application/zip"},
        {".gz", "application/gzip"},
    };
    std::string lower(name);
    std::ranges::transform(lower, lower.begin(), [](unsigned char c) { return std::tolower(c); });
    for (const auto& [extension, type] : kTypes)
        if (lower.size() > extension.size() && lower.ends_with(extension)) return std::string(type);
    return "application/octet-stream";
}

UniqueFd make_host_dir(int parent, const std::string& name, std::optional<uid_t> owner,
                       std::optional<gid_t> group) {
    if (::mkdirat(parent, name.c_str(), 0755) != 0) return {};
    UniqueFd dir(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (dir && owner) ::fchown(dir.get(), *owner, group ? *group : static_cast<gid_t>(-1));
    return dir;
}

namespace {

// N of a "run-N" entry, or 0.
std::uint64_t run_number(std::string_view name) {
    constexpr std::string_view kPrefix = "run-";
    if (!name.starts_with(kPrefix) || name.size() == kPrefix.size() || name[kPrefix.size()] == '0')
        return 0;
    std::uint64_t n = 0;
    const char* end = name.data() + name.size();
    auto [at, error] = std::from_chars(name.data() + kPrefix.size(), end, n);
    return error == std::errc{} && at == end ? n : 0;
}

}  // namespace

UniqueFd make_run_dir(int parent, std::string& name) {
    std::uint64_t highest = 0;
    for (const std::string& entry : sys::sorted_names(parent))
        highest = std::max(highest, run_number(entry));
    // mkdirat makes the directory or fails: a run that lost the race for N takes N + 1.
    constexpr int kTries = 64;
    for (std::uint64_t n = highest + 1; n <= highest + kTries; ++n) {
        name = "run-" + std::to_string(n);
        if (UniqueFd dir = make_host_dir(parent, name)) return dir;
        if (errno != EEXIST) return {};
    }
    return {};
}

Listing collect(int work_dir, const Options& options) {
    Walker walker(options);
    walker.directory(work_dir, options.output_dir, "", 0);
    return walker.take();
}

}  // namespace pysandbox::artifacts
