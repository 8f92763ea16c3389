#include "fronts/kernel_install.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "plan/install_paths.hpp"
#include "plan/profile.hpp"
#include "sys/errors.hpp"

extern char** environ;

namespace pysandbox {
namespace fs = std::filesystem;
namespace {

std::string env_dir(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr && value[0] == '/' ? std::string(value) : std::string();
}

// Where Jupyter looks for kernelspecs, as `jupyter kernelspec install` places them.
fs::path kernels_dir(const KernelInvocation& k) {
    if ((k.user ? 1 : 0) + (k.sys_prefix ? 1 : 0) + (k.prefix.empty() ? 0 : 1) > 1)
        throw UsageError("kernel install takes one of --user, --sys-prefix and --prefix");
    if (!k.prefix.empty()) return fs::absolute(k.prefix) / "share/jupyter/kernels";
    if (k.sys_prefix) {
        const std::string venv = env_dir("VIRTUAL_ENV");
        return fs::path(venv.empty() ? "/usr" : venv) / "share/jupyter/kernels";
    }
    if (std::string dir = env_dir("JUPYTER_DATA_DIR"); !dir.empty())
        return fs::path(dir) / "kernels";
    if (std::string dir = env_dir("XDG_DATA_HOME"); !dir.empty())
        return fs::path(dir) / "jupyter/kernels";
    const std::string home = env_dir("HOME");
    if (home.empty())
        throw UsageError("HOME is not set: give kernel install --prefix DIR or --sys-prefix");
    return fs::path(home) / ".local/share/jupyter/kernels";
}

}  // namespace

void exec_kernel_program(char* const* argv) {
    const fs::path program = installed_kernel_program();
    ::execve(program.c_str(), argv, environ);
    throw SysError("execve(" + program.string() +
                       "): the kernel program is installed beside pysandbox (libexec); "
                       "reinstall pysandbox",
                   errno);
}

int install_kernelspec(const KernelInvocation& k) {
    if (k.name.empty() || k.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
                                                   "VWXYZ0123456789._-") != std::string::npos)
        throw UsageError("kernel name \"" + k.name +
                         "\" must be letters, digits, '.', '_' and '-' only");
    const Profile profile = load_profile(k.profile, profile_search_dirs());  // fails early
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) throw SysError("readlink(/proc/self/exe)", ec.value());
    const std::string profile_arg =
        k.profile.find('/') != std::string::npos ? fs::absolute(k.profile).string() : k.profile;
    const nlohmann::ordered_json spec = {
        {"argv", {self.string(), "kernel", "-f", "{connection_file}", "-p", profile_arg}},
        {"display_name", "Python (sandboxed, " + profile.name + ")"},
        {"language", "python"},
        {"interrupt_mode", "message"},
        {"metadata", {{"pysandbox", {{"profile", profile_arg}}}}}};
    const fs::path dir = kernels_dir(k) / k.name;
    fs::create_directories(dir, ec);
    if (ec) throw SysError("mkdir " + dir.string(), ec.value());
    const fs::path file = dir / "kernel.json";
    std::ofstream out(file, std::ios::trunc);
    out << spec.dump(2) << "\n";
    out.close();
    if (!out) throw SysError("write " + file.string(), errno);
    std::cout << "Installed kernelspec " << k.name << " in " << dir.string() << "\n";
    return 0;
}

}  // namespace pysandbox
