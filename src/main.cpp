// pysandbox: run an untrusted Python program in a locked-down Linux sandbox.
// This is the only place that catches: every error becomes one line on stderr and an exit code.

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "fronts/batch.hpp"
#include "fronts/check.hpp"
#include "fronts/cli.hpp"
#include "fronts/doctor.hpp"
#include "fronts/env.hpp"
#include "fronts/kernel_install.hpp"
#include "fronts/mcp.hpp"
#include "fronts/profile.hpp"
#include "fronts/run.hpp"
#include "fronts/session.hpp"
#include "report/exit_codes.hpp"
#include "report/json_text.hpp"
#include "report/result.hpp"
#include "sys/errors.hpp"
#include "sys/fault_injection.hpp"

extern char** environ;

namespace pysandbox {
namespace {

// The sandboxes' setup passes descriptors to the supervisor (SCM_RIGHTS), which the kernel refuses
// once the host user has more in flight than the sender's soft RLIMIT_NOFILE; every sandbox of
// one user counts, and a script can keep up to its own limit's worth in flight. The setup inherits
// this limit (the script's own comes last, limits.hpp), so it is raised as far as the host allows.
void raise_open_files_limit() {
    rlimit files{};
    if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
        files.rlim_cur = files.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &files);  // best effort: a lower limit only lowers that margin
    }
}

// A pipe created later must never land on 0, 1 or 2 because the caller closed one of them.
void ensure_standard_fds() {
    for (int fd = 0; fd <= 2; ++fd)
        if (::fcntl(fd, F_GETFD) < 0) ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
}

// The test binary only (PYSANDBOX_FAULT_INJECTION, tests/CMakeLists.txt): the faults a test asks
// for (sys/fault_injection.hpp). In the pysandbox binary it is empty: those variables do nothing.
// Copied: the child blanks the environment's memory (step_blank_command_line) before its steps.
void inject_faults() {
#ifdef PYSANDBOX_FAULT_INJECTION
    static std::string sysctl;
    static std::string step;
    faults::Injected& injected = faults::injected();
    if (const char* value = std::getenv("PYSANDBOX_FAKE_APPARMOR_SYSCTL"))
        injected.apparmor_sysctl = (sysctl = value).c_str();
    if (const char* value = std::getenv("PYSANDBOX_FAKE_EPERM_STEP"))
        injected.eperm_step = (step = value).c_str();
#endif
}

std::vector<std::string> host_environment() {
    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) env.emplace_back(*entry);
    return env;
}

// Which JSON object an error is owed: --json asked for one, even when the command line is bad.
enum class JsonWanted { none, run_result, check_result };

JsonWanted wants_json(CommandLine& command_line) {
    if (!command_line.json_requested()) return JsonWanted::none;
    return command_line.parsed("check") ? JsonWanted::check_result : JsonWanted::run_result;
}

// Every error pysandbox itself hits: one line on stderr, and the result object when one is due.
int fail(JsonWanted json, std::string_view kind, std::string_view message,
         std::string_view profile) {
    std::cerr << "pysandbox: " << kind << ": " << message << "\n";
    const std::string line = std::string(kind) + ": " + std::string(message);
    if (json == JsonWanted::run_result)
        std::cout << dump_line(early_error_json(line, profile)) << std::endl;
    else if (json == JsonWanted::check_result)
        std::cout << check::error_json(line) << std::endl;
    return exit_codes::kSandboxError;
}

int dispatch(const Invocation& invocation) {
    switch (invocation.command) {
        case Command::run: return run(invocation.run, host_environment());
        case Command::check: return check::run(invocation.check, host_environment());
        case Command::session: return run_session(invocation.session, host_environment());
        case Command::mcp: return run_mcp(invocation.mcp, host_environment());
        case Command::batch: return run_batch(invocation.batch, host_environment());
        case Command::kernel_install: return install_kernelspec(invocation.kernel);
        case Command::kernel: break;  // main execs the kernel program
        case Command::profile_list: return profile_list();
        case Command::profile_show: return profile_show(invocation.profile_name);
        case Command::doctor:
            return doctor::report(
                doctor::run_checks(
                    {invocation.doctor_kernel == KernelChoice::gvisor, host_environment()}),
                invocation.doctor_json);
        case Command::env_create: return env::create(invocation.env, host_environment());
        case Command::env_list: return env::list(invocation.env, host_environment());
        case Command::env_show: return env::show(invocation.env, host_environment());
        case Command::env_rm: return env::remove(invocation.env, host_environment());
        case Command::env_prune: return env::prune(invocation.env, host_environment());
        case Command::none: break;
    }
    throw UsageError("no command given; see pysandbox --help");
}

}  // namespace
}  // namespace pysandbox

int main(int argc, char** argv) {
    using namespace pysandbox;
    ensure_standard_fds();
    raise_open_files_limit();
    ::signal(SIGPIPE, SIG_IGN);  // a closed stdout is an EPIPE to handle, not a death
    inject_faults();

    CommandLine command_line;
    try {
        command_line.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return command_line.app().exit(e);  // --help, --version
        const JsonWanted json = wants_json(command_line);
        const int code = fail(json, "error", e.what(), command_line.invocation().run.profile);
        if (json == JsonWanted::none) std::cerr << "Run 'pysandbox --help' for usage.\n";
        return code;
    }
    const Invocation& invocation = command_line.invocation();
    const JsonWanted json = wants_json(command_line);
    const std::string& profile = invocation.command == Command::check ? invocation.check.profile
                                 : invocation.command == Command::session
                                     ? invocation.session.profile
                                     : invocation.run.profile;
    try {
        if (invocation.command == Command::kernel) exec_kernel_program(argv);
        return dispatch(invocation);
    } catch (const UsageError& e) {
        return fail(json, "error", e.what(), profile);
    } catch (const ProfileError& e) {
        return fail(json, "profile error", e.what(), profile);
    } catch (const UserNamespaceError& e) {
        return fail(json, "error",
                    std::string(e.what()) +
                        "\n  cannot create user namespaces: " + doctor::user_namespace_hint(),
                    profile);
    } catch (const SysError& e) {
        return fail(json, "error", e.what(), profile);
    } catch (const std::exception& e) {
        return fail(json, "internal error", e.what(), profile);
    }
}
