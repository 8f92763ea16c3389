#include "plan/program.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "embed/python_modules.hpp"
#include "embed/zygote_helper_blob.hpp"
#include "plan/gvisor.hpp"
#include "plan/host_files.hpp"
#include "plan/install_paths.hpp"
#include "plan/policy.hpp"
#include "sys/errors.hpp"
#include "wire/fds.hpp"

namespace pysandbox {
namespace fs = std::filesystem;
namespace {

constexpr std::uintmax_t kMaxScriptBytes = 16 << 20;

std::string read_script(const std::string& path) {
    HostFile script = read_host_file(path, kMaxScriptBytes);
    switch (script.problem) {
        case HostFile::Problem::none: break;
        case HostFile::Problem::directory: throw UsageError("script " + path + ": is a directory");
        case HostFile::Problem::not_regular:
            throw UsageError("script " + path + ": not a regular file");
        case HostFile::Problem::too_large:
            throw UsageError("script " + path + ": larger than 16 MiB");
        case HostFile::Problem::open:
        case HostFile::Problem::read:
            throw UsageError("script " + path + ": " + std::strerror(script.error));
    }
    return std::move(script.data);
}

std::string read_all_stdin() {
    std::string text;
    char buffer[65536];
    for (;;) {
        ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw SysError("read(stdin)", errno);
        if (n == 0) break;
        text.append(buffer, static_cast<std::size_t>(n));
        if (text.size() > kMaxScriptBytes) throw UsageError("program on stdin: larger than 16 MiB");
    }
    return text;
}

// The script, read now, at /sandbox/NAME inside; returns that path.
std::string add_script_file(const std::string& host_path, Plan& plan) {
    std::string inside = std::string(kScriptDir) + "/" + fs::path(host_path).filename().string();
    plan.program_text = {Plan::ProgramText::In::files, plan.files.size()};
    plan.files.push_back({inside, read_script(host_path), 0444});
    return inside;
}

// `python3 -c` code that imports one of the sandbox's modules and runs its main(). Imported, a
// module's bytecode prepared at build time is used; named as a script, it would be compiled from
// source in every run. The directory goes first in sys.path whatever the flags (-I, -S).
std::string import_and_run(std::string_view module) {
    const std::string_view dir = kSandboxPythonDir.substr(0, kSandboxPythonDir.size() - 1);
    return "import sys; sys.path.insert(0, '" + std::string(dir) + "'); import " +
           std::string(module) + "; " + std::string(module) + ".main()";
}

// A module of src/python/ (embedded in the binary) into the sandbox's module directory, with the
// bytecode the build compiled from it (`compiled`: share/pysandbox/python/NAME.TAG.pyc, one per
// interpreter the build knew; each interpreter picks its own TAG): the directory is read-only and
// new for each run, so without it Python would compile the module on every start.
void add_sandbox_module(std::string_view name, const std::vector<fs::path>& compiled, Plan& plan) {
    const std::string dir(kSandboxPythonDir);
    const auto* module = std::ranges::find(python::kModules, name, &python::Module::name);
    plan.files.push_back({dir + std::string(name) + ".py", std::string(module->source), 0444});
    const std::string prefix = std::string(name) + ".";
    for (const fs::path& file : compiled) {
        if (!file.filename().string().starts_with(prefix)) continue;
        HostFile bytecode = read_host_file(file.string(), kMaxScriptBytes);
        // A cache: without it, Python compiles the source instead.
        if (bytecode.problem != HostFile::Problem::none || bytecode.data.empty()) continue;
        plan.files.push_back(
            {dir + "__pycache__/" + file.filename().string(), std::move(bytecode.data), 0444});
    }
}

}  // namespace

void add_program(const Program& program, Plan& plan) {
    plan.argv.push_back(plan.interpreter);
    for (const auto& arg : plan.profile.interpreter_args) plan.argv.push_back(arg);
    switch (program.kind) {
        case Program::Kind::code:
            plan.argv.push_back("-c");
            plan.program_text = {Plan::ProgramText::In::argv, plan.argv.size()};
            plan.argv.push_back(program.text);
            plan.script_label = "-c";
            plan.script_file = "<string>";
            break;
        case Program::Kind::stdin_program:
            plan.stdin_program = read_all_stdin();
            plan.argv.push_back("-");
            plan.script_label = "-";
            plan.script_file = "<stdin>";
            plan.program_text = {Plan::ProgramText::In::stdin_program, 0};
            break;
        case Program::Kind::script_file:
            plan.script_in_sandbox = add_script_file(program.text, plan);
            plan.argv.push_back(plan.script_in_sandbox);
            plan.script_label = program.text;
            // Tracebacks name the caller's path, as given, unless Python could not have printed
            // it as it is (a quote or a control character): then they keep /sandbox/NAME.
            plan.script_file =
                std::ranges::any_of(
                    program.text, [](unsigned char c) { return c < 0x20 || c == 0x7f || c == '"'; })
                    ? plan.script_in_sandbox
                    : program.text;
            if (plan.script_file == plan.script_in_sandbox) plan.script_in_sandbox.clear();
            break;
        case Program::Kind::check: {
            // The analyzer needs the standard library only: no site (nor the .pth files it runs).
            plan.argv.push_back("-S");
            plan.argv.push_back("-c");
            plan.argv.push_back(import_and_run(python::kCheckModule));
            plan.argv.push_back(add_script_file(program.text, plan));
            plan.argv.push_back(policy::analyzer_argument(plan.profile.policy, plan.profile.name));
            plan.script_label = program.text;
            break;
        }
        case Program::Kind::zygote:
        case Program::Kind::driver: {
            // -c "import pysandbox_driver; ..." CONTROL_FD MODULE... (or pysandbox_zygote):
            // imported rather than named as a script, so its prepared bytecode is used. The
            // modules to preload stand where a script's arguments do (init's command line keeps
            // them); a cell or a job has no arguments of its own.
            const bool zygote = program.kind == Program::Kind::zygote;
            plan.argv.push_back("-c");
            plan.argv.push_back(
                import_and_run(zygote ? python::kZygoteModule : python::kDriverModule));
            // Under gVisor the driver inherits no channel: it connects to it, or, where the
            // channels are sealed, sitecustomize.py does and passes it on (gvisor.hpp).
            if (plan.profile.kernel != KernelChoice::gvisor)
                plan.argv.push_back(std::to_string(kControlFd));
            else if (gvisor::needs_seal(plan.profile))
                plan.argv.emplace_back(gvisor::kSealedControl);
            else
                plan.argv.emplace_back(kGvisorControlSocket);
            plan.script_args = plan.argv.size();
            for (const auto& module : plan.profile.preload) plan.argv.push_back(module);
            plan.script_label = zygote ? "zygote" : "session";
            plan.script_file = zygote ? "<job>" : "<cell>";
            return;
        }
    }
    plan.script_args = plan.argv.size();
    for (const auto& arg : program.args) plan.argv.push_back(arg);
}

// The sandbox's own modules: sitecustomize.py (which installs the [policy] audit hook when
// add_environment passes a policy) and the figure backend always; the analyzer for `check`; the
// cell driver for a session, with the wire's constants it reads (pysandbox_wire). All of them are
// the same in every run.
void add_sandbox_python(const Program& program, Plan& plan) {
    const std::vector<fs::path> compiled = built_files("python", "", ".pyc");
    add_sandbox_module(python::kSiteModule, compiled, plan);
    add_sandbox_module(python::kFiguresModule, compiled, plan);
    if (program.kind == Program::Kind::check)
        add_sandbox_module(python::kCheckModule, compiled, plan);
    if (program.kind == Program::Kind::driver) {
        add_sandbox_module(python::kDriverModule, compiled, plan);
        add_sandbox_module(python::kWireModule, compiled, plan);
    }
    if (program.kind == Program::Kind::zygote) {
        // The zygote runs the driver in each job it forks, so it imports it once, too.
        add_sandbox_module(python::kDriverModule, compiled, plan);
        add_sandbox_module(python::kWireModule, compiled, plan);
        add_sandbox_module(python::kZygoteModule, compiled, plan);
        const std::string dir(kSandboxPythonDir);
        plan.files.push_back(
            {dir + std::string(kZygoteHelperFile), std::string(zygote::helper_library()), 0444});
        plan.files.push_back({dir + std::string(kZygoteJobSpecFile), program.text, 0444});
    }
}

}  // namespace pysandbox
