#pragma once
// Landlock, the one optional layer: where the kernel has it, the script may write only beneath
// /tmp and read or execute only beneath the paths the sandbox put there; from ABI 4 on, TCP binds
// and connections are refused but to the proxy's port (none and proxy modes); from ABI 5, device
// ioctls; from ABI 6, abstract UNIX sockets and signals that leave the sandbox's own domain.
// Where the kernel lacks a part, the run goes on with what it has and the result lists the parts
// in force (handled_rights). The rules are decided here, with the plan; the child applies them
// (inside/landlock.hpp).

#include <cstdint>
#include <string>
#include <vector>

#include "plan/profile.hpp"

namespace pysandbox::landlock {

// The access rights and scopes newer than the kernel headers Debian 12 builds with, with the ABI
// that brought them.
inline constexpr std::uint64_t kAccessFsTruncate = 1ULL << 14;        // ABI 3
inline constexpr std::uint64_t kAccessFsIoctlDev = 1ULL << 15;        // ABI 5
inline constexpr std::uint64_t kAccessNetBindTcp = 1ULL << 0;         // ABI 4
inline constexpr std::uint64_t kAccessNetConnectTcp = 1ULL << 1;      // ABI 4
inline constexpr std::uint64_t kScopeAbstractUnixSocket = 1ULL << 0;  // ABI 6
inline constexpr std::uint64_t kScopeSignal = 1ULL << 1;              // ABI 6
inline constexpr int kRuleNetPort = 2;                                // LANDLOCK_RULE_NET_PORT

struct Rule {
    std::string path;  // inside the sandbox
    std::uint64_t access;
};

struct Ruleset {
    int abi = 0;                // 0: the kernel has no Landlock
    std::uint64_t handled = 0;  // every filesystem access right this ABI knows
    // TCP bind and connect (ABI 4), when the network mode is none or proxy; 0 for loopback,
    // where the sandbox's own network namespace is the boundary: Landlock names ports, not
    // addresses, so it cannot tell loopback from elsewhere.
    std::uint64_t handled_net = 0;
    std::vector<std::uint16_t> connect_ports;  // the TCP ports the script may connect to
    std::uint64_t scoped = 0;                  // the scopes (ABI 6)
    std::vector<Rule> rules;
};

// The kernel's Landlock ABI version, or 0.
int kernel_abi() noexcept;

// Rules for a sandbox whose read-only content lives at `read_only`, whose writable places are
// `writable` and whose network is `net`.
Ruleset plan_rules(int abi, NetMode net, const std::vector<std::string>& read_only,
                   const std::vector<std::string>& writable);

// What the ruleset handles, by name, in this order: "fs", "ioctl_dev", "tcp", "scopes".
std::vector<std::string> handled_rights(const Ruleset& ruleset);

}  // namespace pysandbox::landlock
