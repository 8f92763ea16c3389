// The Python-aware policy layer as pysandbox sees it from outside the interpreter: the [policy]
// keys, the records the audit hook sends back, the generated hook and analyzer, the plan's
// adjustments (socket rules follow the network, flags that would skip the hook), and the
// incident log's entries.

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "embed/python_modules.hpp"
#include "engine/policy_channel.hpp"
#include "plan/gvisor.hpp"
#include "plan/plan.hpp"
#include "plan/policy.hpp"
#include "plan/profile.hpp"
#include "report/incident.hpp"
#include "sys/errors.hpp"
#include "test_support.hpp"
#include "wire/zygote_protocol.hpp"

namespace fs = std::filesystem;
using pysandbox::Plan;
using pysandbox::Profile;
using pysandbox::ProfileError;
using pysandbox::Program;
using pysandbox::Request;
using pysandbox::UsageError;
using pysandbox::test::contains;
using pysandbox::test::kShippedProfiles;
using pysandbox::test::message_of;
using pysandbox::test::TempDir;
using pysandbox::test::write_file;
namespace policy = pysandbox::policy;

namespace {

using Strings = std::vector<std::string>;

Profile shipped(const std::string& name) {
    return pysandbox::load_profile(name, std::vector<fs::path>{kShippedProfiles});
}

Profile from_text(std::string_view text) {
    const std::vector<fs::path> dirs{kShippedProfiles};
    return pysandbox::load_profile_text(text, "inline.toml", dirs);
}

bool has(const Strings& list, std::string_view item) {
    return std::ranges::find(list, item) != list.end();
}

std::string text_error(std::string_view text) {
    return message_of<ProfileError>([&] { from_text(text); });
}

Request code_request(std::string code = "pass") {
    Request request;
    request.program = {Program::Kind::code, std::move(code), {}};
    return request;
}

// "2026-12-02T17:04:05.123Z". (By hand: std::regex trips GCC 12's -Wmaybe-uninitialized in the
// sanitizer build.)
bool is_utc_timestamp(std::string_view text) {
    constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:dd.dddZ";
    if (text.size() != kShape.size()) return false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const bool digit = text[i] >= '0' && text[i] <= '9';
        if (kShape[i] == 'd' ? !digit : text[i] != kShape[i]) return false;
    }
    return true;
}

std::unique_ptr<const Plan> plan_for(const Request& request, Profile profile) {
    return pysandbox::make_plan(std::move(profile), request, {});
}

std::string hook_arguments_for(const Profile& profile) {
    return policy::hook_arguments(profile.policy, profile.name,
                                  {pysandbox::kSandboxPythonDir, pysandbox::kPolicyFd});
}

// The value the plan gives `name` in the interpreter's environment, if any.
std::optional<std::string> plan_variable(const Plan& plan, const std::string& name) {
    for (const auto& entry : plan.envp)
        if (entry.starts_with(name + "=")) return entry.substr(name.size() + 1);
    return std::nullopt;
}

std::string_view module_source(std::string_view name) {
    return std::ranges::find(pysandbox::python::kModules, name, &pysandbox::python::Module::name)
        ->source;
}

}  // namespace

TEST_SUITE("policy") {
    TEST_CASE("the hook's records: counted by kind and name, junk ignored, installation noted") {
        const policy::Records records = policy::parse_records(
            "call\tos.system\ncall\tos.system\nimport\tctypes\nhook\tinstalled\n"
            "signal\tx\n"        // an unknown kind
            "call\t\n"           // nothing blocked
            "call\tos system\n"  // not a name
            "no tab at all\n"
            "call\tos.fork");  // torn: no newline
        CHECK(records.hook_installed);
        CHECK(records.blocks ==
              policy::Blocks{{{"call", "os.system"}, 2}, {{"import", "ctypes"}, 1}});
        CHECK_FALSE(policy::parse_records("call\tos.system\n").hook_installed);
    }

    TEST_CASE("a flood of distinct records keeps 100 of them, and counts the rest as others") {
        std::string text;
        for (int i = 0; i < 5000; ++i) text += "call\tfake." + std::to_string(i) + "\n";
        text += "call\tfake.0\n";
        const policy::Records records = policy::parse_records(text);
        CHECK(records.blocks.size() == 101);
        CHECK(records.blocks.at({"call", "fake.0"}) == 2);
        CHECK(records.blocks.at({"call", "(others)"}) == 4900);
    }

    TEST_CASE("module names") {
        for (const char* good : {"os", "xml.etree", "_posixsubprocess", "a1.b_2"})
            CHECK_MESSAGE(policy::is_module_name(good), good);
        for (const char* bad : {"", ".os", "os.", "xml..etree", "1x", "os path", "os/path"})
            CHECK_MESSAGE(!policy::is_module_name(bad), bad);
    }

    TEST_CASE(
        "shipped policies: default denies calls only, strict imports too, network no sockets") {
        const Profile normal = shipped("default");
        CHECK(normal.policy.deny_imports.empty());
        CHECK(has(normal.policy.deny_calls, "os.system"));
        CHECK(has(normal.policy.deny_calls, "subprocess.Popen"));
        const Profile strict = shipped("strict");
        CHECK(has(strict.policy.deny_imports, "ctypes"));
        CHECK(has(strict.policy.deny_calls, "open-write-outside-tmp"));
        CHECK_FALSE(has(shipped("datascience").policy.deny_calls, "os.fork"));
        CHECK_FALSE(has(shipped("network").policy.deny_calls, "socket.connect"));
        for (const auto& profile : {normal, strict}) CHECK(profile.policy.wants_hook());
        CHECK_FALSE(from_text("[policy]\ndeny_calls = []\n").policy.wants_hook());
    }

    TEST_CASE("a bad entry is named at its own line and column") {
        const std::string call =
            text_error("[policy]\ndeny_calls = [\"os.system\",\n  \"os.sistem\"]\n");
        CHECK_MESSAGE(contains(call, "inline.toml:3:3: policy.deny_calls[1]"), call);
        CHECK_MESSAGE(contains(call, "unknown call name"), call);
        CHECK_MESSAGE(contains(call, "os.system, os.exec"), call);  // what is known
        const std::string module = text_error("[policy]\ndeny_imports = [\"xml..etree\"]\n");
        CHECK_MESSAGE(contains(module, "inline.toml:2:17: policy.deny_imports[0]"), module);
        CHECK_MESSAGE(contains(module, "not a module name"), module);
        const std::string log = text_error("[policy]\nincident_log = \"incidents.jsonl\"\n");
        CHECK_MESSAGE(contains(log, "inline.toml:2:16: policy.incident_log"), log);
        CHECK_MESSAGE(contains(log, "must be an absolute path"), log);
    }

    TEST_CASE("the generated hook and analyzer carry the profile's policy as data") {
        Profile profile = from_text(
            "[policy]\ndeny_imports = [\"ctypes\"]\ndeny_calls = [\"os.exec\", \"os.system\"]\n");
        const std::string hook = hook_arguments_for(profile);
        // install(profile, imports, calls, {audit event: rule}, channel fd, own directory,
        // for a zygote's jobs)
        CHECK(hook ==
              "[\"inline\",[\"ctypes\"],[\"os.exec\",\"os.system\"],"
              "{\"os.exec\":\"os.exec\",\"os.system\":\"os.system\"},4,"
              "\"/sandbox/.pysandbox/\",0]");
        // sitecustomize.py (the same in every run) passes it on, literals only, and leaves
        // nothing at module level
        const std::string_view site = module_source("sitecustomize");
        CHECK(contains(site, "\n_policy = os.environ.pop(\"PYSANDBOX_POLICY\", \"\")\n"));
        CHECK(contains(site, "\n    _arguments = eval(_policy, {\"__builtins__\": {}}, {})\n"));
        CHECK(contains(site, "\n    _install(*_arguments)\n"));
        CHECK(contains(site, "\ndel _install, _seal, _policy, _sealed, _hook_fd, os\n"));
        // Under gVisor's seal (plan/gvisor.hpp): the variable and the driver's argument as the
        // plan spells them.
        CHECK(contains(site, "\n_sealed = os.environ.pop(\"" +
                                 std::string(pysandbox::gvisor::kSealVariable) + "\", \"\")\n"));
        CHECK(contains(
            site, "sys.argv[1:2] != [\"" + std::string(pysandbox::gvisor::kSealedControl) + "\"]"));
        CHECK(contains(module_source("pysandbox_driver"),
                       "if where == \"" + std::string(pysandbox::gvisor::kSealedControl) + "\":"));
        CHECK(contains(site, "\n    sys.addaudithook(hook)\n"));
        // A forked job announces itself to the zygote's hook by the wire's event name
        CHECK(contains(site, "forked_event, kept_most = \"" +
                                 std::string(pysandbox::zygote::kForkedEvent) + "\", "));
        Profile kill = from_text("[policy]\ndeny_calls = [\"os.kill\", \"os.fork\"]\n");
        const std::string both = hook_arguments_for(kill);  // os.killpg, os.forkpty too
        CHECK(contains(both, "\"os.kill\":\"os.kill\",\"os.killpg\":\"os.kill\""));
        CHECK(contains(both, "\"os.fork\":\"os.fork\",\"os.forkpty\":\"os.fork\""));
        CHECK(hook_arguments_for(from_text("[policy]\ndeny_calls = []\n")).empty());
        const std::string analyzer = policy::analyzer_argument(profile.policy, profile.name);
        CHECK(contains(analyzer, "\"os.spawnv\":\"os.exec\""));  // os.spawn* reported as os.exec
        CHECK(contains(analyzer, "\"os.system\":\"os.system\""));
        CHECK_FALSE(contains(analyzer, "subprocess.Popen"));  // not denied by this profile
    }

    TEST_CASE("the plan passes the policy to sitecustomize, and --env cannot change that") {
        Request request = code_request();
        // Nor add the seal's (plan/gvisor.hpp), which would connect what it names.
        request.overrides.env = {"PYSANDBOX_POLICY=[\"x\",[],[],{},-1,\"/\"]",
                                 "PYSANDBOX_SEAL=[317,[],\"/run/x\",\"\"]"};
        const Profile normal = shipped("default");
        auto plan = plan_for(request, normal);
        CHECK(plan_variable(*plan, "PYSANDBOX_POLICY") == hook_arguments_for(normal));
        CHECK_FALSE(plan_variable(*plan, "PYSANDBOX_SEAL"));
        auto without = plan_for(request, from_text("[policy]\ndeny_calls = []\n"));
        CHECK_FALSE(plan_variable(*without, "PYSANDBOX_POLICY"));
        const auto has_file = [](const Plan& p, std::string_view path) {
            return std::ranges::any_of(p.files, [&](const auto& f) { return f.path == path; });
        };
        // The hook is sitecustomize's own (one import fewer per run): the same files either way.
        CHECK(has_file(*plan, "/sandbox/.pysandbox/sitecustomize.py"));
        CHECK(has_file(*without, "/sandbox/.pysandbox/sitecustomize.py"));
        CHECK(plan->files.size() == without->files.size());
        // A zygote's interpreter installs the hook for its jobs from its start: the same policy,
        // kept for its jobs
        request.program.kind = pysandbox::Program::Kind::zygote;
        request.program.text = "{}";
        auto zygote = plan_for(request, normal);
        CHECK(plan_variable(*zygote, "PYSANDBOX_POLICY") ==
              policy::hook_arguments(normal.policy, normal.name,
                                     {pysandbox::kSandboxPythonDir, pysandbox::kPolicyFd, true}));
    }

    TEST_CASE("the socket rules apply only without a network") {
        const Profile strict = shipped("strict");
        Request request = code_request();
        auto offline = plan_for(request, strict);
        CHECK(has(offline->profile.policy.deny_calls, "socket.connect"));
        CHECK(has(offline->profile.policy.deny_imports, "socket"));
        request.overrides.net = pysandbox::NetMode::loopback;
        auto online = plan_for(request, strict);
        for (const auto& name : online->profile.policy.deny_calls)
            CHECK_FALSE(name.starts_with("socket"));
        CHECK_FALSE(has(online->profile.policy.deny_imports, "socket"));
        CHECK(has(online->profile.policy.deny_imports, "ctypes"));  // the rest stays
    }

    TEST_CASE("interpreter flags that would skip the hook are refused while there is a [policy]") {
        for (const char* flag : {"-I", "-E", "-S", "-sE"}) {
            Profile profile = shipped("default");
            profile.interpreter_args = {flag};
            const std::string message =
                message_of<UsageError>([&] { plan_for(code_request(), profile); });
            CHECK_MESSAGE(contains(message, "python.args \"" + std::string(flag) + "\""), message);
        }
        Profile quiet = from_text("[python]\nargs = [\"-I\"]\n[policy]\ndeny_calls = []\n");
        CHECK_NOTHROW(plan_for(code_request(), quiet));  // no hook asked for: nothing to skip
        Profile fine = shipped("default");
        fine.interpreter_args = {"-s", "-X", "utf8", "-Wdefault"};
        CHECK_NOTHROW(plan_for(code_request(), fine));
    }

    TEST_CASE("the incident log is opened for appending, never through a link") {
        TempDir dir;
        Request request = code_request("print(1)");
        request.overrides.incident_log = (dir / "incidents.jsonl").string();
        auto plan = plan_for(request, shipped("default"));
        CHECK(plan->incident_log);
        struct stat st {};
        REQUIRE(::stat(request.overrides.incident_log->c_str(), &st) == 0);
        CHECK((st.st_mode & 0777) == 0600);

        fs::create_symlink(dir / "elsewhere", dir / "link.jsonl");
        request.overrides.incident_log = (dir / "link.jsonl").string();
        const std::string message =
            message_of<UsageError>([&] { plan_for(request, shipped("default")); });
        CHECK_MESSAGE(contains(message, "--incident-log: cannot open"), message);
        CHECK_FALSE(fs::exists(dir / "elsewhere"));

        request.overrides.incident_log.reset();
        request.program = {Program::Kind::script_file, (dir / "missing.py").string(), {}};
        Profile logging = from_text("[policy]\nincident_log = \"" + (dir / "p.jsonl").string() +
                                    "\"\ndeny_calls = [\"os.system\"]\n");
        CHECK_THROWS_AS(plan_for(request, logging), UsageError);
        CHECK_MESSAGE(!fs::exists(dir / "p.jsonl"), "bad input created the log");
    }

    TEST_CASE("an incident entry starts with when, what and which script") {
        auto plan = plan_for(code_request("print(1)"), shipped("default"));
        const auto head = pysandbox::incident::head(*plan, "run");
        CHECK(head["schema"] == "pysandbox.incident/v1");
        CHECK(head["command"] == "run");
        CHECK(head["profile"] == "default");
        CHECK(head["script"] == "-c");
        // sha256("print(1)")
        CHECK(head["script_sha256"] ==
              "d287bb7f9d15abdc5b6e98536263815744b6ef21c8f3c839fc434ca70d8efe99");
        CHECK(is_utc_timestamp(head["time"].get<std::string>()));
    }

    TEST_CASE("a session's cell is logged like a run, under its own name and code") {
        auto plan = plan_for(code_request("print(1)"), shipped("default"));
        pysandbox::Outcome outcome;
        outcome.kind = pysandbox::Outcome::Kind::exited;
        CHECK(pysandbox::incident::cell_entry(*plan, outcome, "<cell-3>", "print(1)").is_null());
        outcome.blocked_syscalls["mount"] = 2;
        const auto entry = pysandbox::incident::cell_entry(*plan, outcome, "<cell-3>", "print(1)");
        CHECK(entry["command"] == "session");
        CHECK(entry["script"] == "<cell-3>");
        CHECK(entry["script_sha256"] ==
              "d287bb7f9d15abdc5b6e98536263815744b6ef21c8f3c839fc434ca70d8efe99");
        CHECK(entry["exit_code"] == 0);
        REQUIRE(entry["blocked"].size() == 1);
        CHECK(entry["blocked"][0]["what"] == "mount");
    }
}
