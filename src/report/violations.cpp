#include "report/violations.hpp"

namespace pysandbox {

nlohmann::ordered_json blocked_json(const Outcome& outcome) {
    using json = nlohmann::ordered_json;
    json blocked = json::array();
    for (const auto& [name, count] : outcome.blocked_syscalls) {
        const bool killed = name == outcome.killing_syscall;
        blocked.push_back({{"kind", "syscall"},
                           {"what", name},
                           {"count", count},
                           {"action", killed ? "killed" : "denied"}});
    }
    for (const auto& [destination, count] : outcome.blocked_connections)
        blocked.push_back(
            {{"kind", "network"}, {"what", destination}, {"count", count}, {"action", "denied"}});
    for (const auto& [key, count] : outcome.policy.blocks)
        blocked.push_back(
            {{"kind", key.first}, {"what", key.second}, {"count", count}, {"action", "denied"}});
    if (outcome.channel_mutes > 0)
        blocked.push_back({{"kind", "channel"},
                           {"what", "driver_channel"},
                           {"count", outcome.channel_mutes},
                           {"action", "dropped"}});
    return blocked;
}

}  // namespace pysandbox
