#pragma once
// Network mode "proxy" lets a script reach only the destinations its profile's network.allow
// names. This file is the pure part of that: what a destination and an allowlist entry are, how
// they parse, and which destinations an allowlist lets through. No sockets (proxy.hpp has them),
// so all of it is unit-tested.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pysandbox::proxy {

// A host and port as the script asked for them. `host` is lowercase without a trailing dot; an
// IP literal is in its canonical text form (IPv6 without brackets).
struct Destination {
    std::string host;
    std::uint16_t port = 0;
    bool is_ip_literal = false;

    // "host:port", "[v6]:port": the key of Outcome::blocked_connections.
    std::string to_string() const;
    // "localhost" or a name under it: names the host resolves to itself by convention.
    bool is_localhost() const;
    bool operator==(const Destination&) const = default;
};

// "host:port" or "[v6]:port", the port required. Throws std::invalid_argument saying what is
// wrong.
Destination parse_destination(std::string_view text);

// One network.allow entry: a host name, "*.suffix" (subdomains of suffix only, at any depth), or
// an IP literal; and exactly one port.
struct AllowRule {
    std::string host;  // for a wildcard, the suffix without "*."
    bool wildcard = false;
    std::uint16_t port = 0;

    std::string to_string() const;
    bool matches(const Destination& destination) const;
    bool operator==(const AllowRule&) const = default;
};

// Throws std::invalid_argument saying what is wrong with the entry.
AllowRule parse_allow_rule(std::string_view text);

class Allowlist {
  public:
    Allowlist() = default;
    explicit Allowlist(std::vector<AllowRule> rules) : rules_(std::move(rules)) {}
    // Throws std::invalid_argument naming the bad entry.
    static Allowlist parse(const std::vector<std::string>& entries);

    // Adds a rule unless an equal one is already there.
    void add(const AllowRule& rule);
    // By name, never by address: "localhost:80" does not allow "127.0.0.1:80".
    bool allows(const Destination& destination) const;
    // "api.example.org:443, *.example.net:80", or "(none)".
    std::string describe() const;
    // Each rule as written in a profile.
    std::vector<std::string> entries() const;
    const std::vector<AllowRule>& rules() const { return rules_; }
    bool empty() const { return rules_.empty(); }

  private:
    std::vector<AllowRule> rules_;
};

}  // namespace pysandbox::proxy
