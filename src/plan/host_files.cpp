#include "plan/host_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "plan/plan.hpp"
#include "sys/errors.hpp"

namespace pysandbox {
namespace fs = std::filesystem;
namespace {

// The input's host file, opened now as the caller: the sandbox reads a copy of what the caller
// may read (root's sandboxes run as uid 65534, but root named the file).
InputFile open_input(const InputSpec& spec) {
    const std::string source = fs::absolute(spec.source).lexically_normal().string();
    sys::UniqueFd fd(::open(source.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    if (!fd) throw UsageError("--input: " + spec.source + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
        throw UsageError("--input: " + spec.source + ": not a regular file");
    return {source, spec.name, std::move(fd)};
}

// The inputs' tmpfs holds exactly their pages (and an inode each); it is read-only once filled.
std::string inputs_tmpfs_options(const std::vector<InputFile>& inputs, const IdMap& ids) {
    constexpr std::uint64_t kPage = 4096;
    std::uint64_t pages = 16;
    for (const auto& input : inputs) {
        struct stat st {};
        if (::fstat(input.fd.get(), &st) == 0)
            pages += (static_cast<std::uint64_t>(st.st_size) + kPage - 1) / kPage + 1;
    }
    return "size=" + std::to_string(pages * kPage) +
           ",nr_inodes=" + std::to_string(inputs.size() + 16) +
           ",mode=0755,uid=" + std::to_string(ids.inner_uid) +
           ",gid=" + std::to_string(ids.inner_gid);
}

// Whether the sandbox's host uid may create files in `dir`: the overlay checks the script's
// writes against the directory's own owner and mode, as a bind would.
bool sandbox_can_write(const IdMap& ids, const struct stat& st, const std::string& dir) {
    if (!ids.privileged) return ::access(dir.c_str(), W_OK | X_OK) == 0;
    return (st.st_uid == ids.outer_uid && (st.st_mode & S_IWUSR)) ||
           (st.st_mode & (S_IWOTH | S_IXOTH)) == (S_IWOTH | S_IXOTH);
}

}  // namespace

HostFile read_host_file(const std::string& path, std::uint64_t cap, int extra_flags) {
    HostFile file;
    const sys::UniqueFd fd(
        ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | extra_flags));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0) {
        file.problem = HostFile::Problem::open;
        file.error = errno;
        return file;
    }
    if (S_ISDIR(st.st_mode))
        file.problem = HostFile::Problem::directory;
    else if (!S_ISREG(st.st_mode))
        file.problem = HostFile::Problem::not_regular;
    else if (static_cast<std::uint64_t>(st.st_size) > cap)
        file.problem = HostFile::Problem::too_large;
    if (file.problem != HostFile::Problem::none) return file;
    file.data.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < file.data.size()) {
        const ssize_t n = ::read(fd.get(), file.data.data() + got, file.data.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            file.problem = HostFile::Problem::read;
            file.error = errno;
            return file;
        }
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    file.data.resize(got);
    return file;
}

void add_inputs(const Overrides& overrides, Plan& plan) {
    for (const auto& spec : overrides.inputs) {
        for (const auto& earlier : plan.inputs)
            if (earlier.name == spec.name)
                throw UsageError("--input: two files named \"" + spec.name +
                                 "\" in /tmp/work (give one another name: FILE=NAME)");
        if (plan.inputs.size() == kMaxInputs)
            throw UsageError("--input: at most " + std::to_string(kMaxInputs) + " files");
        plan.inputs.push_back(open_input(spec));
    }
    if (!plan.inputs.empty())
        plan.inputs_tmpfs_options = inputs_tmpfs_options(plan.inputs, plan.ids);
}

// The script writes DIR (through the overlay) as ids.outer_uid, and pysandbox copies its
// changes back as the caller: both must be possible, or every write of the run would fail.
void check_host_workdir(const Overrides& overrides, Plan& plan) {
    if (!overrides.workdir) return;
    const std::string& given = *overrides.workdir;
    if (!overrides.inputs.empty())
        throw UsageError("--workdir: cannot be combined with --input (copy the files into " +
                         given + " instead)");
    const std::string dir = fs::absolute(given).lexically_normal().string();
    sys::UniqueFd fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0)
        throw UsageError("--workdir: " + given + ": " + std::strerror(errno));
    if (!S_ISDIR(st.st_mode)) throw UsageError("--workdir: " + given + ": not a directory");
    if ((!overrides.workdir_stays_callers && !sandbox_can_write(plan.ids, st, dir)) ||
        ::access(dir.c_str(), W_OK | X_OK) != 0)
        throw UsageError("--workdir: " + given + ": not writable by uid " +
                         std::to_string(plan.ids.outer_uid) + ", which the script runs as" +
                         (plan.ids.privileged ? " (chown 65534 it, or chmod o+rwx)" : ""));
    const std::string inner = std::to_string(plan.ids.inner_uid);
    const std::string staging = std::string(mounts::kStagingRoot) + "/" + mounts::kWorkdirLayers;
    HostWorkdir workdir{dir, std::move(fd), {}, {}, overrides.workdir_stays_callers};
    workdir.tmpfs_options = "size=" + std::to_string(plan.profile.limits.tmp_size) +
                            ",nr_inodes=65536,mode=0755,uid=" + inner +
                            ",gid=" + std::to_string(plan.ids.inner_gid);
    workdir.overlay_layers =
        ",upperdir=" + staging + "/upper,workdir=" + staging + "/work,userxattr";
    plan.host_workdir = std::move(workdir);
}

// Artifacts land only where the run itself made room: DIR must be empty (held open from now on)
// or absent (made after the run, in a parent that must exist), never a directory with content a
// copy could land in and later act from (a package, .git/hooks, a site-packages .pth).
namespace {

// --output-runs DIR: DIR may hold anything (earlier runs); nothing in it is ever written, as each
// run makes a new run-N of its own after the run (engine/collect.cpp). DIR is held open when it
// exists, made then when not (in a parent that must exist), and never reached through a link.
void open_output_runs(const std::string& dir, Plan& plan) {
    plan.output_dir = dir;
    plan.output_runs = true;
    plan.output_dir_fd.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (plan.output_dir_fd) {
        if (::faccessat(plan.output_dir_fd.get(), ".", W_OK | X_OK, 0) != 0)
            throw UsageError("--output-runs: " + dir + ": " + std::strerror(errno));
        return;
    }
    const int error = errno;
    struct stat st {};
    if (::lstat(dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
        throw UsageError("--output-runs: " + dir +
                         ": a symbolic link, which pysandbox never follows; name the directory "
                         "itself");
    if (error != ENOENT) throw UsageError("--output-runs: " + dir + ": " + std::strerror(error));
    const std::string parent = fs::path(dir).parent_path().string();
    if (::access(parent.c_str(), W_OK | X_OK) != 0)
        throw UsageError("--output-runs: cannot create " + dir + ": " + parent + ": " +
                         std::strerror(errno));
}

}  // namespace

void check_output_dir(const Overrides& overrides, Plan& plan) {
    if (!overrides.output_dir) return;
    std::string dir = fs::absolute(*overrides.output_dir).lexically_normal().string();
    if (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (overrides.output_runs) return open_output_runs(dir, plan);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
        if (errno != ENOENT) throw UsageError("--output-dir: " + dir + ": " + std::strerror(errno));
        const std::string parent = fs::path(dir).parent_path().string();
        if (::access(parent.c_str(), W_OK | X_OK) != 0)
            throw UsageError("--output-dir: cannot create " + dir + ": " + parent + ": " +
                             std::strerror(errno));
        plan.output_dir = dir;
        return;
    }
    if (!S_ISDIR(st.st_mode)) throw UsageError("--output-dir: " + dir + ": not a directory");
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
        throw UsageError("--output-dir: " + dir + ": " + std::strerror(errno));
    std::error_code ec;
    if (!fs::is_empty(dir, ec))
        throw UsageError("--output-dir: " + dir +
                         " is not empty: artifacts go only into a new or empty directory (they "
                         "could otherwise land where a later program picks them up)");
    plan.output_dir_fd.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!plan.output_dir_fd) throw UsageError("--output-dir: " + dir + ": " + std::strerror(errno));
    plan.output_dir = dir;
}

void open_incident_log(const std::optional<std::string>& flag, Plan& plan) {
    const std::string& path = flag ? *flag : plan.profile.policy.incident_log;
    const char* source = flag ? "--incident-log" : "policy.incident_log";
    if (path.empty()) return;
    // O_NOFOLLOW: a link planted where the log goes does not redirect root's appends.
    plan.incident_log.reset(
        ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!plan.incident_log)
        throw UsageError(std::string(source) + ": cannot open \"" + path +
                         "\" for appending: " + std::strerror(errno));
    plan.incident_log_path = path;
}

}  // namespace pysandbox
