// A zygote's job spec (inside/job_spec.hpp): every field it carries, set away from the Plan's
// default, comes back from write_job_spec -> read_job_spec as it was; the text holds those fields
// and no others; and text that is not a job spec throws.

#include <sched.h>
#include <sys/resource.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <linux/filter.h>
#include <nlohmann/json.hpp>

#include "inside/job_spec.hpp"
#include "plan/plan.hpp"

using namespace pysandbox;
using json = nlohmann::json;

namespace {

// A Plan whose every field the job spec carries differs from a default Plan's.
std::unique_ptr<Plan> job_plan() {
    auto plan = std::make_unique<Plan>();
    plan->workdir = "/tmp/elsewhere";
    plan->tmp_mount_options = "size=1048576,nr_inodes=100,mode=1777";
    plan->shm_mount_options = "size=2097152,mode=1777";
    plan->inputs_tmpfs_options = "size=4096,mode=0555";
    plan->proc_masked = {"/proc/kcore", "/proc/keys"};
    plan->proc_readonly = {"/proc/sys", "/proc/sysrq-trigger"};
    plan->hostname = "job-host";
    plan->profile.network.mode = NetMode::proxy;
    plan->font_list = FontList{"/build/share/fontlist-v390.json", "/tmp/mpl/fontlist-v390.json"};
    plan->rlimits = {{RLIMIT_NOFILE, 64, 128}, {RLIMIT_AS, RLIM_INFINITY, RLIM_INFINITY}};
    plan->user_counts = {{"max_inotify_instances", 8}, {"max_user_namespaces", 0}};
    CPU_SET(1, &plan->affinity);
    CPU_SET(3, &plan->affinity);
    for (int cpu : {0, 1, 2, 3, CPU_SETSIZE - 1}) CPU_SET(cpu, &plan->allowed_cpus);
    plan->landlock.abi = 6;
    plan->landlock.handled = 0xffff;
    plan->landlock.handled_net = 0x3;
    plan->landlock.connect_ports = {3128, 65535};
    plan->landlock.scoped = 0x3;
    plan->landlock.rules = {{"/usr", 0x5}, {"/tmp", 0x7ff}};
    plan->seccomp_program = {{BPF_LD | BPF_W | BPF_ABS, 0, 0, 4},
                             {BPF_JMP | BPF_JEQ | BPF_K, 1, 2, 0xc000003e},
                             {BPF_RET | BPF_K, 0, 0, 0xffffffff}};
    plan->seccomp_listener = false;
    plan->envp = {"PATH=/usr/bin", "LANG=C.UTF-8", "EMPTY="};
    return plan;
}

std::vector<int> cpus(const cpu_set_t& set) {
    std::vector<int> list;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &set)) list.push_back(cpu);
    return list;
}

// The job spec `plan` makes, with one field replaced (a JSON pointer) or removed (null).
std::string edited(const json::json_pointer& where, const json& value) {
    json spec = json::parse(write_job_spec(*job_plan()));
    if (value.is_discarded())
        spec[where.parent_pointer()].erase(where.back());
    else
        spec[where] = value;
    return spec.dump();
}

}  // namespace

TEST_SUITE("job spec") {
    TEST_CASE("the test's plan differs from a default Plan in every field the spec carries") {
        // Otherwise a field the reader forgot would still compare equal below.
        const Plan defaults;
        const auto plan = job_plan();
        CHECK(plan->workdir != defaults.workdir);
        CHECK(plan->tmp_mount_options != defaults.tmp_mount_options);
        CHECK(plan->shm_mount_options != defaults.shm_mount_options);
        CHECK(plan->inputs_tmpfs_options != defaults.inputs_tmpfs_options);
        CHECK(plan->proc_masked != defaults.proc_masked);
        CHECK(plan->proc_readonly != defaults.proc_readonly);
        CHECK(plan->hostname != defaults.hostname);
        CHECK(plan->profile.network.mode != defaults.profile.network.mode);
        CHECK(defaults.font_list == std::nullopt);
        CHECK(plan->rlimits.size() != defaults.rlimits.size());
        CHECK(plan->user_counts.size() != defaults.user_counts.size());
        CHECK(cpus(plan->affinity) != cpus(defaults.affinity));
        CHECK(cpus(plan->allowed_cpus) != cpus(defaults.allowed_cpus));
        CHECK(plan->landlock.abi != defaults.landlock.abi);
        CHECK(plan->landlock.handled != defaults.landlock.handled);
        CHECK(plan->landlock.handled_net != defaults.landlock.handled_net);
        CHECK(plan->landlock.connect_ports != defaults.landlock.connect_ports);
        CHECK(plan->landlock.scoped != defaults.landlock.scoped);
        CHECK(plan->landlock.rules.size() != defaults.landlock.rules.size());
        CHECK(plan->seccomp_program.size() != defaults.seccomp_program.size());
        CHECK(plan->seccomp_listener != defaults.seccomp_listener);
        CHECK(plan->envp != defaults.envp);
    }

    TEST_CASE("write -> read: every field comes back as it was") {
        const auto plan = job_plan();
        const auto back = read_job_spec(write_job_spec(*plan));
        REQUIRE(back != nullptr);
        CHECK(back->workdir == plan->workdir);
        CHECK(back->tmp_mount_options == plan->tmp_mount_options);
        CHECK(back->shm_mount_options == plan->shm_mount_options);
        CHECK(back->inputs_tmpfs_options == plan->inputs_tmpfs_options);
        CHECK(back->proc_masked == plan->proc_masked);
        CHECK(back->proc_readonly == plan->proc_readonly);
        CHECK(back->hostname == plan->hostname);
        CHECK(back->profile.network.mode == plan->profile.network.mode);
        REQUIRE(back->font_list.has_value());
        CHECK(back->font_list->target == plan->font_list->target);
        // The host path is not carried: the zygote holds the list open for its jobs.
        CHECK(back->font_list->source.empty());
        REQUIRE(back->rlimits.size() == plan->rlimits.size());
        for (std::size_t i = 0; i < plan->rlimits.size(); ++i) {
            CAPTURE(i);
            CHECK(back->rlimits[i].resource == plan->rlimits[i].resource);
            CHECK(back->rlimits[i].soft == plan->rlimits[i].soft);
            CHECK(back->rlimits[i].hard == plan->rlimits[i].hard);
        }
        REQUIRE(back->user_counts.size() == plan->user_counts.size());
        for (std::size_t i = 0; i < plan->user_counts.size(); ++i) {
            CAPTURE(i);
            CHECK(back->user_counts[i].name == plan->user_counts[i].name);
            CHECK(back->user_counts[i].max == plan->user_counts[i].max);
        }
        CHECK(cpus(back->affinity) == cpus(plan->affinity));
        CHECK(cpus(back->allowed_cpus) == cpus(plan->allowed_cpus));
        CHECK(back->landlock.abi == plan->landlock.abi);
        CHECK(back->landlock.handled == plan->landlock.handled);
        CHECK(back->landlock.handled_net == plan->landlock.handled_net);
        CHECK(back->landlock.connect_ports == plan->landlock.connect_ports);
        CHECK(back->landlock.scoped == plan->landlock.scoped);
        REQUIRE(back->landlock.rules.size() == plan->landlock.rules.size());
        for (std::size_t i = 0; i < plan->landlock.rules.size(); ++i) {
            CAPTURE(i);
            CHECK(back->landlock.rules[i].path == plan->landlock.rules[i].path);
            CHECK(back->landlock.rules[i].access == plan->landlock.rules[i].access);
        }
        REQUIRE(back->seccomp_program.size() == plan->seccomp_program.size());
        for (std::size_t i = 0; i < plan->seccomp_program.size(); ++i) {
            CAPTURE(i);
            CHECK(back->seccomp_program[i].code == plan->seccomp_program[i].code);
            CHECK(back->seccomp_program[i].jt == plan->seccomp_program[i].jt);
            CHECK(back->seccomp_program[i].jf == plan->seccomp_program[i].jf);
            CHECK(back->seccomp_program[i].k == plan->seccomp_program[i].k);
        }
        CHECK(back->seccomp_listener == plan->seccomp_listener);
        CHECK(back->envp == plan->envp);
    }

    TEST_CASE("read -> write: the text holds the carried fields, and reading loses none") {
        const std::string text = write_job_spec(*job_plan());
        // A field added to the writer must be added to the comparisons above, and to this list.
        std::set<std::string> keys;
        const json spec = json::parse(text);
        for (const auto& [key, value] : spec.items()) keys.insert(key);
        CHECK(keys == std::set<std::string>{"version", "workdir", "tmp", "shm", "inputs_tmpfs",
                                            "proc_masked", "proc_readonly", "hostname", "network",
                                            "font_list", "rlimits", "user_counts", "affinity",
                                            "allowed_cpus", "landlock", "seccomp",
                                            "seccomp_listener", "env"});
        CHECK(write_job_spec(*read_job_spec(text)) == text);
    }

    TEST_CASE("each network mode and no font list come back too") {
        for (NetMode mode : {NetMode::none, NetMode::loopback, NetMode::proxy}) {
            auto plan = job_plan();
            plan->profile.network.mode = mode;
            plan->font_list.reset();
            plan->seccomp_listener = true;
            const auto back = read_job_spec(write_job_spec(*plan));
            CHECK(back->profile.network.mode == mode);
            CHECK(back->font_list == std::nullopt);
            CHECK(back->seccomp_listener);
        }
    }

    TEST_CASE("text that is not a job spec throws") {
        using ptr = json::json_pointer;
        const json removed(json::value_t::discarded);
        // The unedited text reads, so each refusal below is its edit's.
        CHECK_NOTHROW(read_job_spec(edited(ptr("/hostname"), "job-host")));
        CHECK_THROWS_AS(read_job_spec(""), std::exception);
        CHECK_THROWS_AS(read_job_spec("not json"), std::exception);
        CHECK_THROWS_AS(read_job_spec("[]"), std::exception);
        CHECK_THROWS_AS(read_job_spec(write_job_spec(*job_plan()).substr(0, 40)), std::exception);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/version"), 1)), std::runtime_error);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/version"), removed)), std::exception);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/hostname"), removed)), std::exception);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/hostname"), 7)), std::exception);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/network"), -1)), std::runtime_error);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/network"), 3)), std::runtime_error);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/affinity"), json{-1})), std::runtime_error);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/allowed_cpus"), json{CPU_SETSIZE})),
                        std::runtime_error);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/rlimits/0"), json{7, 1})), std::exception);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/user_counts/0"), json{"max_user_namespaces"})),
                        std::exception);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/user_counts/0"), json{1, 2})), std::exception);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/landlock/rules/0"), json{"/usr"})),
                        std::exception);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/landlock/handled_net"), removed)),
                        std::exception);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/landlock/scoped"), "all")), std::exception);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/landlock/connect_ports/0"), 65536)),
                        std::runtime_error);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/landlock/connect_ports/0"), 0)),
                        std::runtime_error);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/seccomp"), json::array())), std::runtime_error);
        json too_long = json::array();
        for (int i = 0; i <= BPF_MAXINSNS; ++i) too_long.push_back({6, 0, 0, 0});
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/seccomp"), too_long)), std::runtime_error);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/seccomp/0"), json{6, 0, 0})), std::exception);
        CHECK_THROWS_AS(read_job_spec(edited(ptr("/env"), "PATH=/usr/bin")), std::exception);
    }
}
