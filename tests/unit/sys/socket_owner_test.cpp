// Who is at the other end of a loopback TCP connection, asked of the kernel's socket diagnostics,
// and which peers a port served for one user admits.

#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys/socket_owner.hpp"
#include "sys/unique_fd.hpp"

using pysandbox::sys::admits;
using pysandbox::sys::SocketPeer;
using pysandbox::sys::tcp_peer;
using pysandbox::sys::UniqueFd;

namespace {

// A listening socket on 127.0.0.1 and a port the kernel chose.
struct Listener {
    UniqueFd fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    sockaddr_in address{};

    Listener() {
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t size = sizeof address;
        REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
        REQUIRE(::listen(fd.get(), 4) == 0);
        REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &size) == 0);
    }

    UniqueFd connect() const {
        UniqueFd client{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
        REQUIRE(::connect(client.get(), reinterpret_cast<const sockaddr*>(&address),
                          sizeof address) == 0);
        return client;
    }

    UniqueFd accept() const {
        return UniqueFd{::accept4(fd.get(), nullptr, nullptr, SOCK_CLOEXEC)};
    }
};

}  // namespace

TEST_CASE("tcp_peer: a loopback connection's other end is this process's user") {
    const Listener listener;
    const UniqueFd client = listener.connect();
    const UniqueFd accepted = listener.accept();
    const auto peer = tcp_peer(accepted.get());
    REQUIRE(peer);
    CHECK(peer->this_host);
    CHECK(peer->local_port == ntohs(listener.address.sin_port));
    REQUIRE(peer->uid);
    CHECK(*peer->uid == ::geteuid());
}

TEST_CASE("tcp_peer: another user's connection is theirs") {
    if (::geteuid() != 0) {
        MESSAGE("needs root to connect as another user; the integration tests do it as well");
        return;
    }
    const Listener listener;
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {  // connects as 65534 and waits for the parent to close the connection
        if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)
            ::_exit(2);
        UniqueFd client{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
        if (::connect(client.get(), reinterpret_cast<const sockaddr*>(&listener.address),
                      sizeof listener.address) != 0)
            ::_exit(3);
        char byte = 0;
        ::_exit(::read(client.get(), &byte, 1) == 0 ? 0 : 4);
    }
    const UniqueFd accepted = listener.accept();
    const auto peer = tcp_peer(accepted.get());
    ::shutdown(accepted.get(), SHUT_RDWR);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(status == 0);
    REQUIRE(peer);
    REQUIRE(peer->uid);
    CHECK(*peer->uid == 65534);
}

TEST_CASE("tcp_peer: not a TCP connection") {
    int pair[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
    const UniqueFd a{pair[0]}, b{pair[1]};
    CHECK_FALSE(tcp_peer(a.get()));
    const Listener listener;  // listening, not connected
    CHECK_FALSE(tcp_peer(listener.fd.get()));
    CHECK_FALSE(tcp_peer(-1));
}

TEST_CASE("admits: the owner and root from this machine; others' only when the port is remote") {
    // {this_host, uid, local_port}: a socket of this machine the diagnostics do not find (bound
    // to a device) is refused like one of another user; another machine's, only off-host.
    const uid_t owner = 1000;
    const SocketPeer owners{true, owner, 1}, roots{true, 0, 1}, others{true, 1001, 1};
    const SocketPeer unknown_local{true, std::nullopt, 1}, remote{false, std::nullopt, 1};
    const SocketPeer other_via_lan{false, 1001, 1};
    for (const bool off_host : {false, true}) {
        CAPTURE(off_host);
        CHECK(admits(owners, owner, off_host));
        CHECK(admits(roots, owner, off_host));
        CHECK_FALSE(admits(others, owner, off_host));
        CHECK_FALSE(admits(other_via_lan, owner, off_host));
        CHECK_FALSE(admits(unknown_local, owner, off_host));
    }
    CHECK_FALSE(admits(remote, owner, false));
    CHECK(admits(remote, owner, true));
}
