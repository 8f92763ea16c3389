#pragma once
// Where a name in the proxy's allowlist may lead. Whoever controls an allowed name's DNS could
// point it anywhere, so a name never leads to the host itself or to a network around it: not to
// any address of the host's own interfaces, not to loopback, private, shared (carrier-grade NAT),
// link-local (cloud metadata services live there), unique-local, multicast or reserved ranges,
// and not to such an IPv4 address in an IPv6 form (mapped, compatible, NAT64, 6to4, Teredo).
// Only an IP literal in the allowlist reaches such an address: that is the operator's choice.
// Pure functions over addresses; the host's own list comes from getifaddrs() in the proxy.

#include <sys/socket.h>

#include <span>
#include <string>
#include <string_view>

namespace pysandbox::proxy {

// Why a name may not lead to `address` ("a private network address"), or empty when it may.
// `host_own` holds the addresses of every interface of the host.
std::string_view forbidden_reason(const sockaddr& address,
                                  std::span<const sockaddr_storage> host_own);

// Whether `address` is loopback (127/8, ::1, or 127/8 in an IPv6 form): where "localhost" and
// names under it may lead.
bool is_loopback(const sockaddr& address);

// "10.0.0.1", "fd00::1": for messages.
std::string address_text(const sockaddr& address);

}  // namespace pysandbox::proxy
