#include "fronts/scratch_dir.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "sys/dir_names.hpp"
#include "sys/errors.hpp"

namespace pysandbox {
namespace {

constexpr const char* kOwner = ".owner";
constexpr const char* kOwnerBeingMade = ".owner-new";

std::string temp_parent() {
    const char* tmp = std::getenv("TMPDIR");
    return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

std::string prefix_of(std::string_view front) {
    return "pysandbox-" + std::string(front) + "-";
}

// If `name` under `parent` is a scratch directory whose front is gone, its `.owner`, locked: held
// until the directory is gone, so a second reaper at the same time finds it taken. Otherwise no
// descriptor (none is kept open on a live front's directory).
sys::UniqueFd lock_if_stale(int parent, const std::string& name) {
    sys::UniqueFd dir(
        ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dir) return {};
    struct stat st {};
    if (::fstat(dir.get(), &st) != 0 || st.st_uid != ::geteuid()) return {};
    sys::UniqueFd owner(::openat(dir.get(), kOwner, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!owner) return {};  // not a scratch directory, or not one yet
    if (::flock(owner.get(), LOCK_EX | LOCK_NB) != 0) return {};
    return owner;
}

}  // namespace

int reap_stale_scratch(const std::string& parent, std::string_view front) {
    sys::UniqueFd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir) return 0;
    const std::string prefix = prefix_of(front);
    int reaped = 0;
    for (const std::string& name : sys::sorted_names(dir.get())) {
        if (!name.starts_with(prefix)) continue;
        const sys::UniqueFd owner = lock_if_stale(dir.get(), name);
        if (!owner) continue;
        // The parent is sticky (/tmp) or the caller's: no one else can swap the name meanwhile;
        // remove_all removes links, never what they point to.
        std::error_code ignored;
        if (std::filesystem::remove_all(parent + "/" + name, ignored) > 0) ++reaped;
    }
    return reaped;
}

ScratchDir::ScratchDir(std::string_view front) {
    const std::string parent = temp_parent();
    reap_stale_scratch(parent, front);
    std::string pattern = parent + "/" + prefix_of(front) + "XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw SysError("mkdtemp(" + pattern + ")", errno);
    path_ = pattern;
    try {
        const sys::UniqueFd dir(
            ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!dir) throw SysError("open(" + path_ + ")", errno);
        // Locked before it is named `.owner`: a reaper never sees it unlocked.
        owner_.reset(::openat(dir.get(), kOwnerBeingMade,
                              O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
        if (!owner_) throw SysError("create(" + path_ + "/" + kOwnerBeingMade + ")", errno);
        check_sys(::flock(owner_.get(), LOCK_EX), "flock(" + path_ + ")");
        check_sys(::renameat(dir.get(), kOwnerBeingMade, dir.get(), kOwner),
                  "rename(" + path_ + "/" + kOwner + ")");
        files_ = path_ + "/files";
        check_sys(::mkdirat(dir.get(), "files", 0700), "mkdir(" + files_ + ")");
    } catch (...) {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
        throw;
    }
}

ScratchDir::~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
}

}  // namespace pysandbox
