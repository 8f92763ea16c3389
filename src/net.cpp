#include "net.hpp"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace pysandbox::net {

int step_configure_network(ChildContext& ctx) noexcept {
    if (ctx.plan.profile.net_mode != NetMode::loopback) return 0;
    int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0) return step_fail(ctx, "socket(AF_INET, SOCK_DGRAM)");
    ifreq request{};
    std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
    request.ifr_flags = IFF_UP | IFF_RUNNING;
    int rc = ::ioctl(sock, SIOCSIFFLAGS, &request);
    int saved = errno;
    ::close(sock);
    errno = saved;
    return rc == 0 ? 0 : step_fail(ctx, "ioctl(lo, SIOCSIFFLAGS, IFF_UP)");
}

int step_set_hostname(ChildContext& ctx) noexcept {
    const std::string& name = ctx.plan.hostname;
    if (::sethostname(name.data(), name.size()) != 0)
        return step_fail(ctx, "sethostname(%s)", name.c_str());
    return 0;
}

}  // namespace pysandbox::net
