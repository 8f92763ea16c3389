#pragma once
// Whole records over a SOCK_SEQPACKET socket, each optionally carrying one file descriptor
// (SCM_RIGHTS). noexcept and allocation-free: the sandbox's init uses them too.

#include <sys/socket.h>
#include <time.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace pysandbox::sys {

// The most descriptors one record carries here (a zygote's job request: zygote_protocol.hpp).
inline constexpr std::size_t kMaxRecordFds = 8;

// Sends `size` bytes and, with them, the `count` descriptors of `fds`.
inline ssize_t send_record_fds(int socket, const void* data, std::size_t size, const int* fds,
                               std::size_t count) noexcept {
    if (count > kMaxRecordFds) {
        errno = EINVAL;
        return -1;
    }
    iovec part{const_cast<void*>(data), size};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxRecordFds)] = {};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    if (count > 0) {
        message.msg_control = control;
        message.msg_controllen = CMSG_SPACE(sizeof(int) * count);
        cmsghdr* cmsg = CMSG_FIRSTHDR(&message);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int) * count);
        std::memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * count);
    }
    ssize_t sent;
    while ((sent = ::sendmsg(socket, &message, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
    }
    return sent;
}

// Sends `size` bytes and, when fd >= 0, the descriptor with them.
inline ssize_t send_record(int socket, const void* data, std::size_t size, int fd = -1) noexcept {
    return send_record_fds(socket, data, size, &fd, fd >= 0 ? 1 : 0);
}

// Receives one record into `data`; the descriptors sent with it (close-on-exec) land in `fds`,
// at most `capacity` of them, and `count` says how many. A record that carried more, or whose
// control data was cut, fails with EMSGSIZE and installs none.
inline ssize_t receive_record_fds(int socket, void* data, std::size_t size, int* fds,
                                  std::size_t capacity, std::size_t& count) noexcept {
    iovec part{data, size};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxRecordFds)] = {};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * std::min(capacity, kMaxRecordFds));
    count = 0;
    ssize_t received;
    while ((received = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
    }
    if (received < 0) return received;
    for (cmsghdr* cmsg = CMSG_FIRSTHDR(&message); cmsg; cmsg = CMSG_NXTHDR(&message, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t n = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        std::memcpy(fds + count, CMSG_DATA(cmsg), sizeof(int) * std::min(n, capacity - count));
        count += std::min(n, capacity - count);
    }
    if (message.msg_flags & MSG_CTRUNC) {
        for (std::size_t i = 0; i < count; ++i) ::close(fds[i]);
        count = 0;
        errno = EMSGSIZE;
        return -1;
    }
    return received;
}

// Receives one record into `data`; a descriptor sent with it lands in `fd` (close-on-exec),
// else fd is -1.
inline ssize_t receive_record(int socket, void* data, std::size_t size, int& fd) noexcept {
    std::size_t count = 0;
    fd = -1;
    return receive_record_fds(socket, data, size, &fd, 1, count);
}

// A record from a peer that may be hostile, on a socket with SO_PASSCRED: the control buffer holds
// credentials and a timestamp only, so descriptors sent along are discarded by the kernel
// (MSG_CTRUNC), never kept (any that were installed all the same are closed here). `size` is the
// record's whole length (MSG_TRUNC), even when more than the buffer. With SO_PASSCRED every record
// carries credentials, so a 0-byte record (ended is false) differs from the peer's end (size 0,
// ended true). With SO_TIMESTAMPNS on the socket, `sent` is when the peer sent the record
// (CLOCK_REALTIME, stamped by the kernel: the peer cannot choose it); else it is zero.
struct UntrustedRecord {
    ssize_t size;  // -1: errno says why
    bool ended;
    timespec sent;
};

inline UntrustedRecord receive_untrusted(int socket, void* data, std::size_t size,
                                         int flags = 0) noexcept {
    iovec part{data, size};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(sizeof(timespec))];
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(socket, &message, flags | MSG_TRUNC | MSG_CMSG_CLOEXEC);
    UntrustedRecord record{n, n == 0 && message.msg_controllen == 0, {}};
    if (n < 0) return record;
    for (cmsghdr* cmsg = CMSG_FIRSTHDR(&message); cmsg; cmsg = CMSG_NXTHDR(&message, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET) continue;
        if (cmsg->cmsg_type == SCM_TIMESTAMPNS && cmsg->cmsg_len == CMSG_LEN(sizeof(timespec)))
            std::memcpy(&record.sent, CMSG_DATA(cmsg), sizeof(timespec));
        if (cmsg->cmsg_type == SCM_RIGHTS)
            for (std::size_t i = 0; i < (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
                int fd;
                std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof fd);
                ::close(fd);
            }
    }
    return record;
}

// Whether `socket` listens (SO_ACCEPTCONN). A channel's socket that the sandbox binds and
// listens on (engine/policy_channel.hpp) polls as hung up until it does: it is watched only then.
inline bool listens(int socket) noexcept {
    int listening = 0;
    socklen_t size = sizeof listening;
    return ::getsockopt(socket, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0 &&
           listening != 0;
}

}  // namespace pysandbox::sys
