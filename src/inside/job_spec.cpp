#include "inside/job_spec.hpp"

#include <cstdint>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace pysandbox {
namespace {

using nlohmann::json;

constexpr int kVersion = 2;

json cpus(const cpu_set_t& set) {
    json list = json::array();
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &set)) list.push_back(cpu);
    return list;
}

cpu_set_t cpus(const json& list) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (const json& cpu : list) {
        const int n = cpu.get<int>();
        if (n < 0 || n >= CPU_SETSIZE) throw std::runtime_error("job spec: CPU out of range");
        CPU_SET(n, &set);
    }
    return set;
}

}  // namespace

std::string write_job_spec(const Plan& plan) {
    json spec;
    spec["version"] = kVersion;
    spec["workdir"] = plan.workdir;
    spec["tmp"] = plan.tmp_mount_options;
    spec["shm"] = plan.shm_mount_options;
    spec["inputs_tmpfs"] = plan.inputs_tmpfs_options;
    spec["proc_masked"] = plan.proc_masked;
    spec["proc_readonly"] = plan.proc_readonly;
    spec["hostname"] = plan.hostname;
    spec["network"] = static_cast<int>(plan.profile.network.mode);
    spec["font_list"] = plan.font_list ? json(plan.font_list->target) : json();
    json limits = json::array();
    for (const Rlimit& limit : plan.rlimits)
        limits.push_back({limit.resource, static_cast<std::uint64_t>(limit.soft),
                          static_cast<std::uint64_t>(limit.hard)});
    spec["rlimits"] = std::move(limits);
    json counts = json::array();
    for (const UserCount& count : plan.user_counts) counts.push_back({count.name, count.max});
    spec["user_counts"] = std::move(counts);
    spec["affinity"] = cpus(plan.affinity);
    spec["allowed_cpus"] = cpus(plan.allowed_cpus);
    json rules = json::array();
    for (const landlock::Rule& rule : plan.landlock.rules)
        rules.push_back({rule.path, rule.access});
    spec["landlock"] = {{"abi", plan.landlock.abi},
                        {"handled", plan.landlock.handled},
                        {"handled_net", plan.landlock.handled_net},
                        {"connect_ports", plan.landlock.connect_ports},
                        {"scoped", plan.landlock.scoped},
                        {"rules", std::move(rules)}};
    json program = json::array();
    for (const sock_filter& insn : plan.seccomp_program)
        program.push_back({insn.code, insn.jt, insn.jf, insn.k});
    spec["seccomp"] = std::move(program);
    spec["seccomp_listener"] = plan.seccomp_listener;
    // For the zygote's Python, not the helper: the job's environment.
    spec["env"] = plan.envp;
    return spec.dump();
}

std::unique_ptr<Plan> read_job_spec(std::string_view text) {
    const json spec = json::parse(text);
    if (spec.at("version").get<int>() != kVersion)
        throw std::runtime_error("job spec: not version " + std::to_string(kVersion));
    auto plan = std::make_unique<Plan>();
    plan->workdir = spec.at("workdir").get<std::string>();
    plan->tmp_mount_options = spec.at("tmp").get<std::string>();
    plan->shm_mount_options = spec.at("shm").get<std::string>();
    plan->inputs_tmpfs_options = spec.at("inputs_tmpfs").get<std::string>();
    plan->proc_masked = spec.at("proc_masked").get<std::vector<std::string>>();
    plan->proc_readonly = spec.at("proc_readonly").get<std::vector<std::string>>();
    plan->hostname = spec.at("hostname").get<std::string>();
    const int network = spec.at("network").get<int>();
    if (network < static_cast<int>(NetMode::none) || network > static_cast<int>(NetMode::proxy))
        throw std::runtime_error("job spec: unknown network mode");
    plan->profile.network.mode = static_cast<NetMode>(network);
    if (const json& list = spec.at("font_list"); !list.is_null())
        plan->font_list = FontList{"", list.get<std::string>()};
    for (const json& limit : spec.at("rlimits"))
        plan->rlimits.push_back(
            Rlimit{limit.at(0).get<int>(), limit.at(1).get<rlim_t>(), limit.at(2).get<rlim_t>()});
    for (const json& count : spec.at("user_counts"))
        plan->user_counts.push_back(
            UserCount{count.at(0).get<std::string>(), count.at(1).get<std::uint64_t>()});
    plan->affinity = cpus(spec.at("affinity"));
    plan->allowed_cpus = cpus(spec.at("allowed_cpus"));
    const json& ruleset = spec.at("landlock");
    plan->landlock.abi = ruleset.at("abi").get<int>();
    plan->landlock.handled = ruleset.at("handled").get<std::uint64_t>();
    plan->landlock.handled_net = ruleset.at("handled_net").get<std::uint64_t>();
    for (const json& port : ruleset.at("connect_ports")) {
        const auto number = port.get<std::uint64_t>();
        if (number == 0 || number > UINT16_MAX)
            throw std::runtime_error("job spec: a TCP port out of range");
        plan->landlock.connect_ports.push_back(static_cast<std::uint16_t>(number));
    }
    plan->landlock.scoped = ruleset.at("scoped").get<std::uint64_t>();
    for (const json& rule : ruleset.at("rules"))
        plan->landlock.rules.push_back(
            landlock::Rule{rule.at(0).get<std::string>(), rule.at(1).get<std::uint64_t>()});
    for (const json& insn : spec.at("seccomp"))
        plan->seccomp_program.push_back(
            sock_filter{insn.at(0).get<std::uint16_t>(), insn.at(1).get<std::uint8_t>(),
                        insn.at(2).get<std::uint8_t>(), insn.at(3).get<std::uint32_t>()});
    if (plan->seccomp_program.empty() || plan->seccomp_program.size() > BPF_MAXINSNS)
        throw std::runtime_error("job spec: no seccomp program, or one too long");
    plan->seccomp_listener = spec.at("seccomp_listener").get<bool>();
    plan->envp = spec.at("env").get<std::vector<std::string>>();
    return plan;
}

}  // namespace pysandbox
