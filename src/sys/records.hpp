#pragma once
// Whole records over a SOCK_SEQPACKET socket, each optionally carrying one file descriptor
// (SCM_RIGHTS). noexcept and allocation-free: the sandbox's init uses them too.

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace pysandbox::sys {

// Sends `size` bytes and, when fd >= 0, the descriptor with them.
inline ssize_t send_record(int socket, const void* data, std::size_t size, int fd = -1) noexcept {
    iovec part{const_cast<void*>(data), size};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    if (fd >= 0) {
        message.msg_control = control;
        message.msg_controllen = sizeof control;
        cmsghdr* cmsg = CMSG_FIRSTHDR(&message);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(cmsg), &fd, sizeof fd);
    }
    ssize_t sent;
    while ((sent = ::sendmsg(socket, &message, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
    }
    return sent;
}

// Receives one record into `data`; a descriptor sent with it lands in `fd` (close-on-exec),
// else fd is -1.
inline ssize_t receive_record(int socket, void* data, std::size_t size, int& fd) noexcept {
    iovec part{data, size};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    fd = -1;
    ssize_t received = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    if (cmsghdr* cmsg = CMSG_FIRSTHDR(&message);
        received >= 0 && cmsg && cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS)
        std::memcpy(&fd, CMSG_DATA(cmsg), sizeof fd);
    return received;
}

// A record from a peer that may be hostile, on a socket with SO_PASSCRED: the control buffer holds
// credentials only, so descriptors sent along are discarded by the kernel (MSG_CTRUNC), never
// installed. `size` is the record's whole length (MSG_TRUNC), even when more than the buffer.
// With SO_PASSCRED every record carries credentials, so a 0-byte record (ended is false) differs
// from the peer's end (size 0, ended true).
struct UntrustedRecord {
    ssize_t size;  // -1: errno says why
    bool ended;
};

inline UntrustedRecord receive_untrusted(int socket, void* data, std::size_t size,
                                         int flags = 0) noexcept {
    iovec part{data, size};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(socket, &message, flags | MSG_TRUNC | MSG_CMSG_CLOEXEC);
    return {n, n == 0 && message.msg_controllen == 0};
}

}  // namespace pysandbox::sys
