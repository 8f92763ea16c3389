#include "fronts/doctor.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

#include "embed/version.hpp"
#include "engine/execute.hpp"
#include "plan/gvisor.hpp"
#include "plan/install_paths.hpp"
#include "plan/landlock_rules.hpp"
#include "plan/plan.hpp"
#include "plan/profile.hpp"
#include "sys/apparmor.hpp"
#include "sys/cgroup.hpp"

namespace pysandbox::doctor {
namespace {

std::string read_first_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

// In a child, so that doctor itself stays in the host's namespace. A child that cannot be
// started or waited for proves nothing: the check fails, naming the call.
Check check_user_namespaces() {
    Check check{"user namespaces", false, true, {}, {}};
    pid_t pid = ::fork();
    if (pid == 0) _exit(::unshare(CLONE_NEWUSER) == 0 ? 0 : errno);
    if (pid < 0) {
        check.detail = std::string("fork: ") + std::strerror(errno);
        check.fix = "doctor could not start a process to try: raise the process limit";
        return check;
    }
    int status = 0;
    pid_t waited;
    while ((waited = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    if (waited < 0) {
        check.detail = std::string("waitpid: ") + std::strerror(errno);
        check.fix = "doctor could not wait for its own child: is SIGCHLD ignored by its caller?";
        return check;
    }
    int error = WIFEXITED(status) ? WEXITSTATUS(status) : EINVAL;
    check.ok = error == 0;
    check.detail = check.ok ? "unshare(CLONE_NEWUSER) works"
                            : std::string("unshare(CLONE_NEWUSER): ") + std::strerror(error);
    if (!check.ok) check.fix = user_namespace_hint();
    return check;
}

// A host setting, set for good: written under /etc/sysctl.d, then every file there applied.
std::string persisted_sysctl(std::string_view setting) {
    return "echo " + std::string(setting) +
           " | sudo tee /etc/sysctl.d/60-pysandbox-userns.conf && sudo sysctl --system";
}

// Both ways past AppArmor's restriction: the profile that grants pysandbox `userns` (where the
// install put it in /etc/apparmor.d, loaded; else the data dir's copy, installed and loaded), or
// the restriction lifted for every program.
std::string apparmor_fix() {
    const std::filesystem::path loaded = "/etc/apparmor.d/pysandbox";
    std::error_code ignored;
    const std::string reload = "sudo apparmor_parser -r " + loaded.string();
    const std::string profile =
        std::filesystem::exists(loaded, ignored)
            ? reload
            : "sudo install -m644 " +
                  (installed_data_dir() / "apparmor" / "pysandbox").lexically_normal().string() +
                  " " + loaded.string() + " && " + reload;
    return "load pysandbox's AppArmor profile, which grants it user namespaces: " + profile +
           "; or lift the restriction for every program: " +
           persisted_sysctl("kernel.apparmor_restrict_unprivileged_userns=0");
}

// Decided by a real run: under the restriction a profile that grants `userns` (pysandbox's own)
// lets the sandbox work, and only the end-to-end run shows whether one does.
Check check_apparmor(const std::optional<Check>& end_to_end) {
    Check check{"AppArmor user-namespace restriction", true, true, "not restricted", {}};
    if (!apparmor::restricts_userns()) return check;
    const std::string sysctl = "kernel.apparmor_restrict_unprivileged_userns = 1";
    if (::geteuid() == 0) {
        check.detail = sysctl + ", which does not restrict root";
    } else if (end_to_end && end_to_end->ok) {
        check.detail = sysctl +
                       ": restricted by AppArmor, allowed for pysandbox by its AppArmor "
                       "profile (the end-to-end sandbox ran)";
    } else {
        check.ok = false;
        check.detail = sysctl + (end_to_end ? ": the end-to-end sandbox failed under it"
                                            : ": the end-to-end sandbox could not be tried");
        check.fix = apparmor_fix();
    }
    return check;
}

Check check_seccomp() {
    Check check{"seccomp user notification", false, true, {}, {}};
    std::string actions = read_first_line("/proc/sys/kernel/seccomp/actions_avail");
    check.ok = (" " + actions + " ").find(" user_notif ") != std::string::npos;
    check.detail = actions.empty() ? "no seccomp in this kernel" : "actions: " + actions;
    if (!check.ok) check.fix = "use a kernel >= 5.0 built with CONFIG_SECCOMP_FILTER";
    return check;
}

// What a run's ruleset handles on a kernel of `abi`, and what this kernel is too old for.
std::string rights_in(int abi) {
    const landlock::Ruleset ruleset = landlock::plan_rules(abi, NetMode::proxy, {}, {});
    std::string text;
    for (const std::string& right : landlock::handled_rights(ruleset))
        text += (text.empty() ? "" : ", ") + (right == "tcp" ? "tcp (--net none, proxy)" : right);
    if (abi < 4) text += "; TCP needs ABI 4";
    if (abi < 5) text += "; device ioctls need ABI 5";
    if (abi < 6) text += "; scopes (abstract UNIX sockets, signals) need ABI 6";
    return text;
}

Check check_landlock() {
    int abi = landlock::kernel_abi();
    Check check{"Landlock", abi > 0, false, {}, {}};
    check.detail = abi > 0 ? "ABI " + std::to_string(abi) + ": " + rights_in(abi) : "not available";
    if (!check.ok)
        check.fix =
            "optional: a kernel >= 5.13 with lsm=...,landlock on its command line; "
            "without it, runs report Landlock as degraded";
    return check;
}

// The same decision a run makes (cgroup::find_own_delegation), so doctor and the result agree.
Check check_cgroup() {
    Check check{"cgroup v2 delegation", false, false, {}, {}};
    auto found = cgroup::find_own_delegation();
    if (auto* delegation = std::get_if<cgroup::Delegation>(&found)) {
        check.ok = true;
        check.detail = "runs get a child cgroup of " + delegation->dir.string();
    } else {
        check.detail = std::get<cgroup::Unavailable>(found) + " (rlimits are used)";
        check.fix =
            "optional: run under systemd-run --user --scope -p Delegate=yes with memory "
            "and pids enabled in cgroup.subtree_control; without it, memory and "
            "processes are limited with rlimits";
    }
    return check;
}

Check check_interpreter(const Profile& profile) {
    Check check{"interpreter", false, true, {}, {}};
    check.ok = ::access(profile.interpreter.c_str(), X_OK) == 0;
    check.detail = profile.interpreter +
                   (check.ok ? " is executable" : ": " + std::string(std::strerror(errno)));
    if (!check.ok)
        check.fix =
            "install python3 (apt-get install python3) or set [python] interpreter in "
            "the profile";
    return check;
}

// The real thing: `pysandbox run -c pass` with the default profile.
Check check_end_to_end(const Profile& profile) {
    Check check{"end-to-end sandbox", false, true, {}, {}};
    try {
        Request request;
        request.program = {Program::Kind::code, "pass", {}};
        auto plan = make_plan(profile, request, {});
        Outcome outcome = execute(*plan);
        check.ok = outcome.kind == Outcome::Kind::exited && outcome.exit_code == 0;
        check.detail =
            check.ok ? "python ran in the sandbox; setup took " +
                           std::to_string(outcome.setup.count()) + " ms"
                     : outcome.step + ": " + outcome.detail + ": " + std::strerror(outcome.error);
    } catch (const std::exception& e) {
        check.detail = e.what();
    }
    if (!check.ok) check.fix = "see the failed checks above";
    return check;
}

// kvm, the other platform Debian 12's runsc knows (systrap is newer): whether this user could use
// it. It is not started: pysandbox runs gVisor on ptrace (the sandbox has no /dev/kvm), and kvm
// hung in a nested VM, so a probe would only risk a hang to answer what no run asks.
std::string kvm_platform() {
    const int fd = ::open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        ::close(fd);
        return "kvm: /dev/kvm is usable, not tried (pysandbox runs gVisor on ptrace)";
    }
    return errno == ENOENT ? "kvm: no /dev/kvm"
                           : "kvm: /dev/kvm: " + std::string(std::strerror(errno));
}

// Whether sandbox.kernel = "gvisor" (the paranoid profile) works here: one run of the sandbox on
// gVisor, with the runsc a run would find (the caller's PATH) on the platform runs use, bounded by
// kGvisorProbeLimit: its wall-clock limit kills the sandbox, runsc and all, should runsc hang.
// `required`: the caller asked for gVisor (doctor --kernel gvisor, or a default profile on it);
// otherwise gVisor is an option and its failure only warns. `sandbox_works`: the end-to-end run
// passed; runsc runs inside that sandbox, so without it there is nothing to try.
Check check_gvisor(Profile profile, bool required, bool sandbox_works,
                   const std::vector<std::string>& host_env) {
    Check check{"gVisor (sandbox.kernel = \"gvisor\")", false, required, {}, {}};
    const std::string kvm = kvm_platform();
    if (!sandbox_works) {
        check.detail = "not tried: runsc runs inside pysandbox's sandbox, which fails here; " + kvm;
        check.fix = "fix the failed checks above first";
        return check;
    }
    profile.kernel = KernelChoice::gvisor;
    profile.limits.wall_time = kGvisorProbeLimit;
    const std::string platform = "platform " + std::string(gvisor::kPlatform);
    try {
        Request request;
        request.program = {Program::Kind::code, "pass", {}};
        request.capture_output = true;  // runsc's complaints belong in the detail, not on stdout
        auto plan = make_plan(profile, request, host_env);
        Outcome outcome = execute(*plan);
        check.ok = outcome.kind == Outcome::Kind::exited && outcome.exit_code == 0;
        if (check.ok) {
            check.detail = platform + " works: python ran on gVisor (" + plan->gvisor->runsc +
                           ") in " + std::to_string((outcome.setup + outcome.wall).count()) +
                           " ms; " + kvm;
            return check;
        }
        std::string said = outcome.captured ? outcome.captured->stderr_text : "";
        if (const auto end = said.find_last_not_of('\n'); end != std::string::npos)
            said = said.substr(said.rfind('\n', end) + 1, end - said.rfind('\n', end));
        const std::string how =
            outcome.kind == Outcome::Kind::exited
                ? "exited with " + std::to_string(outcome.exit_code)
            : outcome.kind == Outcome::Kind::timeout
                ? "no answer in " + std::to_string(kGvisorProbeLimit.count() / 1000) + " s (killed)"
                : outcome.step + ": " + outcome.detail;
        check.detail = platform + " fails with " + plan->gvisor->runsc + ": " + how +
                       (said.empty() ? "" : " (runsc: " + said + ")") + "; " + kvm;
        check.fix =
            "run `pysandbox run --kernel gvisor -c pass` to see runsc's messages; a "
            "runsc other than Debian's (apt-get install runsc) may need other flags";
    } catch (const std::exception& e) {
        // find_runsc's SysError: what is wrong, then its fix on the next line.
        const std::string_view what = e.what();
        const std::size_t fix = what.find("\n  ");
        check.detail = std::string(what.substr(0, fix)) + "; " + kvm;
        check.fix = fix == std::string_view::npos ? "apt-get install runsc, or keep "
                                                    "sandbox.kernel = \"host\""
                                                  : std::string(what.substr(fix + 3));
    }
    return check;
}

bool all_required_pass(const std::vector<Check>& checks) {
    return std::ranges::all_of(checks, [](const Check& c) { return c.ok || !c.required; });
}

}  // namespace

std::string user_namespace_hint() {
    if (apparmor::restricts_caller())
        return "AppArmor restricts unprivileged user namespaces: " + apparmor_fix();
    std::ifstream max_ns("/proc/sys/user/max_user_namespaces");
    long max = -1;
    if (max_ns >> max && max == 0) return persisted_sysctl("user.max_user_namespaces=15000");
    std::ifstream debian("/proc/sys/kernel/unprivileged_userns_clone");
    int allowed = 1;
    if (debian >> allowed && allowed == 0)
        return persisted_sysctl("kernel.unprivileged_userns_clone=1");
    return "check that user namespaces are enabled (pysandbox doctor)";
}

// The AppArmor check waits for the end-to-end run, which it does not gate: under AppArmor's
// restriction that run is what tells whether pysandbox's profile lets it work.
std::vector<Check> run_checks(const Options& options) {
    std::vector<Check> checks{check_user_namespaces(), check_seccomp(), check_landlock(),
                              check_cgroup()};
    std::optional<Check> end_to_end;
    std::optional<Profile> profile;
    try {
        profile = load_profile("default", profile_search_dirs());
        checks.push_back(check_interpreter(*profile));
        if (all_required_pass(checks)) end_to_end = check_end_to_end(*profile);
    } catch (const std::exception& e) {
        checks.push_back({"default profile", false, true, e.what(),
                          "reinstall pysandbox or fix the profile named above"});
    }
    checks.insert(checks.begin() + 1, check_apparmor(end_to_end));
    const bool sandbox_works = end_to_end && end_to_end->ok;
    if (end_to_end) checks.push_back(std::move(*end_to_end));
    if (profile) {
        // Asked for, gVisor is checked whatever failed before it, so that it fails visibly.
        const bool required = options.gvisor || profile->kernel == KernelChoice::gvisor;
        if (required || sandbox_works)
            checks.push_back(check_gvisor(*profile, required, sandbox_works, options.host_env));
    }
    return checks;
}

nlohmann::ordered_json report_json(const std::vector<Check>& checks) {
    nlohmann::ordered_json out = {{"schema", kDoctorSchema},
                                  {"version", kVersion},
                                  {"ok", all_required_pass(checks)},
                                  {"checks", nlohmann::ordered_json::array()}};
    for (const auto& c : checks)
        out["checks"].push_back(
            {{"name", c.name},
             {"ok", c.ok},
             {"required", c.required},
             {"detail", c.detail},
             {"fix", c.ok ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.fix)}});
    return out;
}

int report(const std::vector<Check>& checks, bool json) {
    const bool ready = all_required_pass(checks);
    if (json) {
        std::cout << report_json(checks).dump(2) << "\n";
    } else {
        for (const auto& c : checks) {
            const char* mark = c.ok ? "ok  " : (c.required ? "FAIL" : "warn");
            std::cout << mark << "  " << c.name << ": " << c.detail << "\n";
            if (!c.ok) std::cout << "      fix: " << c.fix << "\n";
        }
        std::cout << (ready
                          ? "pysandbox can run scripts here.\n"
                          : "pysandbox cannot run scripts here until the FAIL lines are fixed.\n");
    }
    return ready ? 0 : 1;
}

}  // namespace pysandbox::doctor
