#pragma once
// Who is at the other end of an accepted TCP connection: the user owning the connecting socket,
// when that socket is on this machine. The kernel's socket diagnostics (NETLINK_SOCK_DIAG, what
// ss(8) reads) are asked for the one socket whose source is our peer's address and whose
// destination is ours; no privilege is needed. A peer on another machine has no such socket.

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace pysandbox::sys {

struct SocketPeer {
    // Its address is this machine's: loopback (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104) or one
    // of the interfaces' addresses.
    bool this_host = false;
    std::optional<uid_t> uid;      // its socket's owner, when the diagnostics find the socket
    std::uint16_t local_port = 0;  // the port it connected to: which of ours
};

// The peer of the connected TCP socket `fd`; nullopt when `fd` is not one (a Unix socket, a
// socket whose peer has gone, a descriptor reused for something else) or when the diagnostics
// cannot be asked.
std::optional<SocketPeer> tcp_peer(int fd);

// Whether a connection from `peer` may stay on a port served for the user `owner`: one from this
// machine when its socket is the owner's or root's (who could read the owner's files anyway); one
// from elsewhere, whose user cannot be known, only when the port listens off this host
// (`listens_off_host`: someone chose to be reached from other machines). A connection from one
// of this machine's addresses whose socket the diagnostics do not find is refused: the exact
// lookup passes over a socket bound to a device (SO_BINDTODEVICE, open to any user since Linux
// 5.7), which is how another user's could pass for another machine's.
bool admits(const SocketPeer& peer, uid_t owner, bool listens_off_host);

}  // namespace pysandbox::sys
