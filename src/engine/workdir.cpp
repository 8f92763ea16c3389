#include "engine/workdir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "sys/dir_names.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox::workdir {
namespace {

using sys::UniqueFd;

// The upper layer is the script's: a walk it could make endless stops here.
constexpr int kMaxDepth = 32;
constexpr std::size_t kMaxEntries = 100'000;
constexpr mode_t kPlainBits = 0777;  // no set-uid, set-gid or sticky bit reaches the host

UniqueFd open_dir(int parent, const std::string& name) {
    return UniqueFd(
        ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

bool is_whiteout(const struct stat& st) {
    return S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0);
}

// An overlay directory that replaced the lower one (rmdir, then mkdir): what was below is gone.
bool is_opaque(int dir) {
    char value[4] = {};
    return ::fgetxattr(dir, "user.overlay.opaque", value, sizeof value) > 0 && value[0] == 'y';
}

std::string temp_name() {
    static std::atomic<unsigned> counter{0};
    return ".pysandbox-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

class Applier {
  public:
    explicit Applier(const Options& options) : options_(options) {}

    void directory(int upper, int host, const std::string& prefix, int depth) {
        for (const std::string& name : sys::sorted_names(upper)) {
            if (++entries_ > kMaxEntries) return fail(prefix + name, E2BIG);
            struct stat st {};
            if (::fstatat(upper, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
            if (is_whiteout(st))
                remove(host, name, prefix + name, 0);
            else if (S_ISDIR(st.st_mode) && depth + 1 < kMaxDepth)
                subdirectory(upper, host, name, st, prefix, depth);
            else if (S_ISREG(st.st_mode))
                file(upper, host, name, st, prefix + name);
            // Links, FIFOs, sockets and devices stay in the sandbox.
        }
    }

    std::vector<std::string> take() { return std::move(problems_); }

  private:
    void fail(const std::string& path, int error) {
        if (problems_.size() < 100)
            problems_.push_back("--workdir: " + path + ": " + std::strerror(error));
    }

    void give_away(int fd) {
        if (options_.owner)
            ::fchown(fd, *options_.owner, options_.group ? *options_.group : gid_t(-1));
    }

    // Removes `name` from `dir`, a whole directory tree included, never following a link.
    void remove(int dir, const std::string& name, const std::string& path, int depth) {
        if (::unlinkat(dir, name.c_str(), 0) == 0 || errno == ENOENT) return;
        if (errno != EISDIR || depth >= kMaxDepth) return fail(path, errno);
        if (UniqueFd sub = open_dir(dir, name))
            for (const std::string& inner : sys::sorted_names(sub.get()))
                remove(sub.get(), inner, path + "/" + inner, depth + 1);
        if (::unlinkat(dir, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) fail(path, errno);
    }

    void subdirectory(int upper, int host, const std::string& name, const struct stat& st,
                      const std::string& prefix, int depth) {
        UniqueFd from = open_dir(upper, name);
        if (!from) return fail(prefix + name, errno);
        struct stat there {};
        const bool exists = ::fstatat(host, name.c_str(), &there, AT_SYMLINK_NOFOLLOW) == 0;
        if (exists && (!S_ISDIR(there.st_mode) || is_opaque(from.get())))
            remove(host, name, prefix + name, depth);
        const bool made = !exists || !S_ISDIR(there.st_mode) || is_opaque(from.get());
        if (made && ::mkdirat(host, name.c_str(), 0700) != 0) return fail(prefix + name, errno);
        UniqueFd to = open_dir(host, name);
        if (!to) return fail(prefix + name, errno);
        if (made) give_away(to.get());
        ::fchmod(to.get(), st.st_mode & kPlainBits);
        directory(from.get(), to.get(), prefix + name + "/", depth + 1);
    }

    // The copy is written into an unnamed O_TMPFILE and named only once complete (a temporary
    // name, then renamed over `name`): a pysandbox killed while copying leaves nothing in the
    // host directory. Without O_TMPFILE the temporary name is made at once.
    void file(int upper, int host, const std::string& name, const struct stat& st,
              const std::string& path) {
        UniqueFd in(::openat(upper, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
        if (!in) return fail(path, errno);
        const std::string temp = temp_name();
        bool named = false;
        UniqueFd out(::openat(host, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600));
        if (!out) {
            named = true;
            out.reset(::openat(host, temp.c_str(),
                               O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
        }
        if (!out) return fail(path, errno);
        int error = copy_sparse(in.get(), out.get(), st.st_size);
        if (error == 0) {
            give_away(out.get());
            ::fchmod(out.get(), st.st_mode & kPlainBits);
            if (!named) {
                const std::string self = "/proc/self/fd/" + std::to_string(out.get());
                named =
                    ::linkat(AT_FDCWD, self.c_str(), host, temp.c_str(), AT_SYMLINK_FOLLOW) == 0;
                if (!named) error = errno;
            }
        }
        if (error == 0) {
            if (::renameat(host, temp.c_str(), host, name.c_str()) == 0) return;
            if (errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST) {
                remove(host, name, path, 0);  // a directory gave way to a file
                if (::renameat(host, temp.c_str(), host, name.c_str()) == 0) return;
            }
            error = errno;
        }
        fail(path, error);
        if (named) ::unlinkat(host, temp.c_str(), 0);
    }

    // The data of `in`, holes kept as holes: a sparse file costs what it holds, not its size.
    static int copy_sparse(int in, int out, off_t size) {
        std::array<char, 65536> buffer;
        for (off_t data = 0; data < size;) {
            data = ::lseek(in, data, SEEK_DATA);
            if (data < 0) break;  // ENXIO: only a hole is left
            const off_t hole = ::lseek(in, data, SEEK_HOLE);
            if (hole < 0) return errno;
            for (off_t at = data; at < hole;) {
                const auto want = static_cast<std::size_t>(
                    std::min<off_t>(hole - at, static_cast<off_t>(buffer.size())));
                const ssize_t n = ::pread(in, buffer.data(), want, at);
                if (n <= 0) return n < 0 ? errno : EIO;
                if (::pwrite(out, buffer.data(), static_cast<std::size_t>(n), at) != n)
                    return errno != 0 ? errno : EIO;
                at += n;
            }
            data = hole;
        }
        return ::ftruncate(out, size) == 0 ? 0 : errno;
    }

    const Options& options_;
    std::size_t entries_ = 0;
    std::vector<std::string> problems_;
};

}  // namespace

std::vector<std::string> apply(int upper, int host, const Options& options) {
    Applier applier(options);
    applier.directory(upper, host, "", 0);
    return applier.take();
}

}  // namespace pysandbox::workdir
