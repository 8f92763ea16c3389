// Destinations and allowlist entries: parsing, canonical forms and matching.

#include "proxy/allowlist.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "sys/ascii.hpp"

namespace pysandbox::proxy {
namespace {

constexpr std::size_t kMaxHostName = 253;
constexpr std::size_t kMaxLabel = 63;

bool is_label_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || ascii::is_digit(c) || c == '-' ||
           c == '_';
}

// A DNS name: dot-separated labels of letters, digits, '-' and '_'. The last label may not be
// all digits: "127.1" or "10.0.0.010" would be read as an address by the resolver, and must not
// slip past rules written for names.
bool is_host_name(std::string_view name) {
    if (name.empty() || name.size() > kMaxHostName) return false;
    std::string_view last;
    for (std::size_t start = 0; start <= name.size();) {
        std::size_t dot = std::min(name.find('.', start), name.size());
        std::string_view label = name.substr(start, dot - start);
        if (label.empty() || label.size() > kMaxLabel || label.front() == '-' ||
            label.back() == '-' || !std::ranges::all_of(label, is_label_char))
            return false;
        last = label;
        start = dot + 1;
    }
    return !ascii::is_all_digits(last);
}

// The canonical text of an IP address, or nullopt when `text` is not one.
std::optional<std::string> canonical_ip(const std::string& text, int family) {
    unsigned char binary[sizeof(in6_addr)];
    char out[INET6_ADDRSTRLEN];
    if (::inet_pton(family, text.c_str(), binary) != 1) return std::nullopt;
    if (::inet_ntop(family, binary, out, sizeof out) == nullptr) return std::nullopt;
    return std::string(out);
}

std::uint16_t parse_port(std::string_view text) {
    if (!ascii::is_all_digits(text) || text.size() > 5)
        throw std::invalid_argument("port \"" + std::string(text) + "\" is not a number");
    unsigned long port = std::stoul(std::string(text));
    if (port < 1 || port > 65535)
        throw std::invalid_argument("port " + std::string(text) + " is outside 1-65535");
    return static_cast<std::uint16_t>(port);
}

struct HostPort {
    std::string_view host;
    std::string_view port;
    bool bracketed = false;
};

HostPort split_host_port(std::string_view text) {
    if (text.starts_with('[')) {
        std::size_t close = text.find(']');
        if (close == std::string_view::npos || text.substr(close + 1, 1) != ":")
            throw std::invalid_argument("expected [IPV6]:PORT");
        return {text.substr(1, close - 1), text.substr(close + 2), true};
    }
    std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) throw std::invalid_argument("expected HOST:PORT");
    std::string_view host = text.substr(0, colon);
    if (host.find(':') != std::string_view::npos)
        throw std::invalid_argument("an IPv6 address needs brackets, e.g. [::1]:8080");
    return {host, text.substr(colon + 1), false};
}

Destination make_destination(const HostPort& parts) {
    Destination destination;
    destination.port = parse_port(parts.port);
    std::string host(parts.host);
    if (parts.bracketed) {
        auto ip = canonical_ip(host, AF_INET6);
        if (!ip) throw std::invalid_argument("\"" + host + "\" is not an IPv6 address");
        return {*ip, destination.port, true};
    }
    if (auto ip = canonical_ip(host, AF_INET)) return {*ip, destination.port, true};
    host = ascii::lowercase(host);
    if (host.ends_with('.')) host.pop_back();  // the fully qualified spelling of the same name
    if (!is_host_name(host))
        throw std::invalid_argument("\"" + std::string(parts.host) + "\" is not a host name");
    return {host, destination.port, false};
}

std::string bracket_if_ipv6(const std::string& host) {
    return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

}  // namespace

std::string Destination::to_string() const {
    return bracket_if_ipv6(host) + ":" + std::to_string(port);
}

bool Destination::is_localhost() const {
    return !is_ip_literal && (host == "localhost" || host.ends_with(".localhost"));
}

Destination parse_destination(std::string_view text) {
    return make_destination(split_host_port(text));
}

std::string AllowRule::to_string() const {
    return (wildcard ? "*." + host : bracket_if_ipv6(host)) + ":" + std::to_string(port);
}

bool AllowRule::matches(const Destination& destination) const {
    if (destination.port != port) return false;
    if (!wildcard) return destination.host == host;
    return !destination.is_ip_literal && destination.host.size() > host.size() + 1 &&
           destination.host.ends_with("." + host);
}

AllowRule parse_allow_rule(std::string_view text) {
    if (text.starts_with("*.")) {
        HostPort parts = split_host_port(text.substr(2));
        Destination suffix = make_destination(parts);
        if (suffix.is_ip_literal || parts.bracketed)
            throw std::invalid_argument("a wildcard needs a domain name after \"*.\"");
        return {suffix.host, true, suffix.port};
    }
    if (text.find('*') != std::string_view::npos)
        throw std::invalid_argument(
            "'*' is only allowed as a whole first label, as in *.example.net:443");
    Destination destination = parse_destination(text);
    return {destination.host, false, destination.port};
}

Allowlist Allowlist::parse(const std::vector<std::string>& entries) {
    Allowlist allowlist;
    for (const auto& entry : entries) {
        try {
            allowlist.add(parse_allow_rule(entry));
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument("\"" + entry + "\": " + e.what());
        }
    }
    return allowlist;
}

void Allowlist::add(const AllowRule& rule) {
    if (std::ranges::find(rules_, rule) == rules_.end()) rules_.push_back(rule);
}

bool Allowlist::allows(const Destination& destination) const {
    return std::ranges::any_of(rules_, [&](const AllowRule& r) { return r.matches(destination); });
}

std::string Allowlist::describe() const {
    std::string out;
    for (const auto& rule : rules_) out += (out.empty() ? "" : ", ") + rule.to_string();
    return out.empty() ? "(none)" : out;
}

std::vector<std::string> Allowlist::entries() const {
    std::vector<std::string> out;
    for (const auto& rule : rules_) out.push_back(rule.to_string());
    return out;
}

}  // namespace pysandbox::proxy
