#include "plan/install_paths.hpp"

#include <algorithm>
#include <cstdlib>

#include "embed/version.hpp"

namespace pysandbox {
namespace fs = std::filesystem;
namespace {

fs::path exe_dir() {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path{} : exe.parent_path();
}

}  // namespace

fs::path installed_data_dir() {
    fs::path dir = exe_dir();
    return dir.empty() ? dir : (dir / kBinToDataDir).lexically_normal();
}

fs::path installed_kernel_program() {
    fs::path dir = exe_dir();
    return dir.empty() ? dir : (dir / kBinToKernelProgram).lexically_normal();
}

std::vector<fs::path> profile_search_dirs() {
    std::vector<fs::path> dirs;
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    const char* home = std::getenv("HOME");
    if (xdg != nullptr && xdg[0] == '/')
        dirs.push_back(fs::path(xdg) / "pysandbox/profiles");
    else if (home != nullptr && home[0] == '/')
        dirs.push_back(fs::path(home) / ".config/pysandbox/profiles");
    dirs.emplace_back("/etc/pysandbox/profiles");
    if (fs::path dir = installed_data_dir(); !dir.empty()) dirs.push_back(dir / "profiles");
    return dirs;
}

// What the build left in share/pysandbox/SUBDIR: the regular files named PREFIX*SUFFIX, by name.
std::vector<fs::path> built_files(std::string_view subdir, std::string_view prefix,
                                  std::string_view suffix) {
    std::vector<fs::path> found;
    const fs::path data = installed_data_dir();
    if (data.empty()) return found;
    std::error_code ec;
    for (auto it = fs::directory_iterator(data / subdir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.starts_with(prefix) && name.ends_with(suffix) && it->is_regular_file(ec))
            found.push_back(it->path());
    }
    std::ranges::sort(found);
    return found;
}

}  // namespace pysandbox
