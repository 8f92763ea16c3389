#include "proxy/addresses.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>
#include <cstring>
#include <optional>

namespace pysandbox::proxy {
namespace {

struct Range {
    std::uint32_t network;
    int prefix;
    std::string_view reason;
};

// IPv4 ranges no name may lead to (RFC 6890 and friends).
constexpr Range kForbiddenV4[] = {
    {0x00000000, 8, "an address of this host"},
    {0x0a000000, 8, "a private network address"},
    {0x64400000, 10, "a shared (carrier-grade NAT) address"},  // 100.100.100.200: metadata
    {0x7f000000, 8, "a loopback address"},
    {0xa9fe0000, 16, "a link-local address"},  // 169.254.169.254: metadata
    {0xac100000, 12, "a private network address"},
    {0xc0000000, 24, "an IETF protocol address"},
    {0xc0a80000, 16, "a private network address"},
    {0xc6120000, 15, "a benchmarking address"},
    {0xe0000000, 4, "a multicast address"},
    {0xf0000000, 4, "a reserved address"},
};

bool in_range(std::uint32_t ip, std::uint32_t network, int prefix) {
    const std::uint32_t mask = prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - prefix);
    return (ip & mask) == (network & mask);
}

std::uint32_t v4_at(const std::uint8_t* bytes) {
    std::uint32_t ip;
    std::memcpy(&ip, bytes, 4);
    return ntohl(ip);
}

bool starts_with(const in6_addr& ip, std::initializer_list<std::uint8_t> prefix) {
    std::size_t i = 0;
    for (std::uint8_t byte : prefix)
        if (ip.s6_addr[i++] != byte) return false;
    return true;
}

bool all_zero(const std::uint8_t* bytes, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        if (bytes[i] != 0) return false;
    return true;
}

// The IPv4 address an IPv6 one stands for: mapped (::ffff:a.b.c.d), compatible (::a.b.c.d),
// NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::).
std::optional<std::uint32_t> embedded_v4(const in6_addr& ip) {
    const std::uint8_t* b = ip.s6_addr;
    if (all_zero(b, 10) && b[10] == 0xff && b[11] == 0xff) return v4_at(b + 12);
    if (all_zero(b, 12) && v4_at(b + 12) > 1) return v4_at(b + 12);
    if (starts_with(ip, {0x00, 0x64, 0xff, 0x9b}) && all_zero(b + 4, 8)) return v4_at(b + 12);
    if (starts_with(ip, {0x20, 0x02})) return v4_at(b + 2);
    return std::nullopt;
}

std::string_view v4_reason(std::uint32_t ip) {
    for (const Range& range : kForbiddenV4)
        if (in_range(ip, range.network, range.prefix)) return range.reason;
    return {};
}

std::string_view v6_reason(const in6_addr& ip) {
    if (IN6_IS_ADDR_UNSPECIFIED(&ip)) return "an address of this host";
    if (IN6_IS_ADDR_LOOPBACK(&ip)) return "a loopback address";
    if (auto v4 = embedded_v4(ip)) {
        if (std::string_view reason = v4_reason(*v4); !reason.empty()) return reason;
        return {};
    }
    const std::uint8_t first = ip.s6_addr[0];
    if ((first & 0xfe) == 0xfc) return "a unique-local address";  // fd00:ec2::254: metadata
    if (IN6_IS_ADDR_LINKLOCAL(&ip)) return "a link-local address";
    if (IN6_IS_ADDR_SITELOCAL(&ip)) return "a site-local address";
    if (IN6_IS_ADDR_MULTICAST(&ip)) return "a multicast address";
    if (starts_with(ip, {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01})) return "a local-use NAT64 address";
    if (starts_with(ip, {0x20, 0x01, 0x00, 0x00})) return "a Teredo address";
    if (starts_with(ip, {0x01, 0x00}) && all_zero(ip.s6_addr + 2, 6)) return "a discard address";
    return {};
}

// The address's bytes for comparing with the host's own: an IPv4 address, or one in an IPv6
// form, as its 4 bytes; any other IPv6 address as its 16.
std::string identity(const sockaddr& address) {
    if (address.sa_family == AF_INET) {
        const auto& v4 = reinterpret_cast<const sockaddr_in&>(address).sin_addr;
        return std::string(reinterpret_cast<const char*>(&v4), 4);
    }
    if (address.sa_family != AF_INET6) return {};
    const in6_addr& ip = reinterpret_cast<const sockaddr_in6&>(address).sin6_addr;
    if (auto v4 = embedded_v4(ip)) {
        const std::uint32_t network = htonl(*v4);
        return std::string(reinterpret_cast<const char*>(&network), 4);
    }
    return std::string(reinterpret_cast<const char*>(ip.s6_addr), 16);
}

}  // namespace

std::string_view forbidden_reason(const sockaddr& address,
                                  std::span<const sockaddr_storage> host_own) {
    std::string_view reason;
    if (address.sa_family == AF_INET)
        reason = v4_reason(ntohl(reinterpret_cast<const sockaddr_in&>(address).sin_addr.s_addr));
    else if (address.sa_family == AF_INET6)
        reason = v6_reason(reinterpret_cast<const sockaddr_in6&>(address).sin6_addr);
    else
        return "not an internet address";
    if (!reason.empty()) return reason;
    const std::string self = identity(address);
    for (const sockaddr_storage& own : host_own)
        if (identity(reinterpret_cast<const sockaddr&>(own)) == self)
            return "an address of this host";
    return {};
}

bool is_loopback(const sockaddr& address) {
    if (address.sa_family == AF_INET)
        return (ntohl(reinterpret_cast<const sockaddr_in&>(address).sin_addr.s_addr) >> 24) == 127;
    if (address.sa_family != AF_INET6) return false;
    const in6_addr& ip = reinterpret_cast<const sockaddr_in6&>(address).sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&ip)) return true;
    auto v4 = embedded_v4(ip);
    return v4 && (*v4 >> 24) == 127;
}

std::string address_text(const sockaddr& address) {
    char text[INET6_ADDRSTRLEN] = "?";
    if (address.sa_family == AF_INET)
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(address).sin_addr, text,
                    sizeof text);
    else if (address.sa_family == AF_INET6)
        ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(address).sin6_addr, text,
                    sizeof text);
    return text;
}

}  // namespace pysandbox::proxy
