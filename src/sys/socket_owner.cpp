#include "sys/socket_owner.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstring>

#include "sys/unique_fd.hpp"

namespace pysandbox::sys {
namespace {

bool loopback(const sockaddr_storage& address) {
    if (address.ss_family == AF_INET) {
        const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
        return (ntohl(v4.sin_addr.s_addr) >> 24) == 127;
    }
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address).sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
}

bool same_address(const sockaddr_storage& address, const sockaddr* other) {
    if (other == nullptr || other->sa_family != address.ss_family) return false;
    if (address.ss_family == AF_INET)
        return reinterpret_cast<const sockaddr_in&>(address).sin_addr.s_addr ==
               reinterpret_cast<const sockaddr_in*>(other)->sin_addr.s_addr;
    return std::memcmp(&reinterpret_cast<const sockaddr_in6&>(address).sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(other)->sin6_addr,
                       sizeof(in6_addr)) == 0;
}

// Loopback, or an address of one of this machine's interfaces; when they cannot be listed, taken
// as this machine's (the caller then refuses what it cannot attribute).
bool this_host(const sockaddr_storage& address) {
    if (loopback(address)) return true;
    ifaddrs* interfaces = nullptr;
    if (::getifaddrs(&interfaces) != 0) return true;
    bool found = false;
    for (const ifaddrs* at = interfaces; at != nullptr && !found; at = at->ifa_next)
        found = same_address(address, at->ifa_addr);
    ::freeifaddrs(interfaces);
    return found;
}

// The address and port of `address` as inet_diag's socket id holds them (network order).
void fill(const sockaddr_storage& address, __be16& port, std::array<__be32, 4>& words) {
    if (address.ss_family == AF_INET) {
        const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
        port = v4.sin_port;
        words = {v4.sin_addr.s_addr, 0, 0, 0};
    } else {
        const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
        port = v6.sin6_port;
        std::memcpy(words.data(), &v6.sin6_addr, sizeof v6.sin6_addr);
    }
}

// The owner of the TCP socket whose source is `from` and destination `to`, on this machine.
std::optional<uid_t> owner(const sockaddr_storage& from, const sockaddr_storage& to) {
    const UniqueFd diag{::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG)};
    if (!diag) return std::nullopt;
    struct {
        nlmsghdr header;
        inet_diag_req_v2 request;
    } message{};
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST;  // the one socket, not a dump
    message.request.sdiag_family = static_cast<__u8>(from.ss_family);
    message.request.sdiag_protocol = IPPROTO_TCP;
    message.request.idiag_states = ~0U;
    std::array<__be32, 4> source{}, destination{};
    fill(from, message.request.id.idiag_sport, source);
    fill(to, message.request.id.idiag_dport, destination);
    std::memcpy(message.request.id.idiag_src, source.data(), sizeof source);
    std::memcpy(message.request.id.idiag_dst, destination.data(), sizeof destination);
    message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::sendto(diag.get(), &message, sizeof message, 0, reinterpret_cast<sockaddr*>(&kernel),
                 sizeof kernel) != static_cast<ssize_t>(sizeof message))
        return std::nullopt;
    // The kernel answers within sendto(): the reply is there, or there is none.
    alignas(nlmsghdr) std::array<char, 1024> reply{};
    const ssize_t got = ::recv(diag.get(), reply.data(), reply.size(), MSG_DONTWAIT);
    if (got < static_cast<ssize_t>(NLMSG_LENGTH(sizeof(inet_diag_msg)))) return std::nullopt;
    const auto* header = reinterpret_cast<const nlmsghdr*>(reply.data());
    if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
        header->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg)))
        return std::nullopt;  // NLMSG_ERROR: ENOENT when no socket here has that source
    inet_diag_msg found{};
    std::memcpy(&found, NLMSG_DATA(header), sizeof found);
    return found.idiag_uid;
}

}  // namespace

std::optional<SocketPeer> tcp_peer(int fd) {
    int protocol = 0;
    socklen_t size = sizeof protocol;
    if (::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &size) != 0 || protocol != IPPROTO_TCP)
        return std::nullopt;
    sockaddr_storage ours{}, theirs{};
    socklen_t ours_size = sizeof ours, theirs_size = sizeof theirs;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ours), &ours_size) != 0 ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &theirs_size) != 0 ||
        ours.ss_family != theirs.ss_family ||
        (ours.ss_family != AF_INET && ours.ss_family != AF_INET6))
        return std::nullopt;
    SocketPeer peer;
    peer.this_host = this_host(theirs);
    peer.local_port =
        ntohs(ours.ss_family == AF_INET ? reinterpret_cast<const sockaddr_in&>(ours).sin_port
                                        : reinterpret_cast<const sockaddr_in6&>(ours).sin6_port);
    peer.uid = owner(theirs, ours);
    return peer;
}

bool admits(const SocketPeer& peer, uid_t owner, bool listens_off_host) {
    if (peer.uid) return *peer.uid == owner || *peer.uid == 0;
    return listens_off_host && !peer.this_host;
}

}  // namespace pysandbox::sys
