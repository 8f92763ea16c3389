#include "inside/seccomp_load.hpp"

#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace pysandbox::seccomp {

int load_without_listener(const std::vector<sock_filter>& program) noexcept {
    if (program.empty() || program.size() > BPF_MAXINSNS) return -EINVAL;  // len is 16 bits
    sock_fprog prog{static_cast<unsigned short>(program.size()),
                    const_cast<sock_filter*>(program.data())};
    return ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0 ? -errno : 0;
}

int load(const std::vector<sock_filter>& program) noexcept {
    if (program.empty() || program.size() > BPF_MAXINSNS) return -EINVAL;
    sock_fprog prog{static_cast<unsigned short>(program.size()),
                    const_cast<sock_filter*>(program.data())};
    long fd =
        ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    return fd < 0 ? -errno : static_cast<int>(fd);
}

}  // namespace pysandbox::seccomp
