#include "inside/net.hpp"

#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "sys/records.hpp"
#include "sys/unique_fd.hpp"
#include "wire/report.hpp"
#include "wire/sandbox_paths.hpp"

namespace pysandbox::net {

int step_configure_network(ChildContext& ctx) noexcept {
    if (ctx.plan.profile.network.mode == NetMode::none) return 0;
    sys::UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!sock) return step_fail(ctx, "socket(AF_INET, SOCK_DGRAM)");
    ifreq request{};
    std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
    request.ifr_flags = IFF_UP | IFF_RUNNING;
    if (::ioctl(sock.get(), SIOCSIFFLAGS, &request) != 0)
        return step_fail(ctx, "ioctl(lo, SIOCSIFFLAGS, IFF_UP)");
    return 0;
}

// The listening socket is made here, inside, so it is bound in the sandbox's namespace; it is
// then handed to the supervisor and closed, so the script never holds it (it could accept the
// connections itself) and cannot bind the port (the supervisor's copy keeps it in use).
int step_open_proxy_port(ChildContext& ctx) noexcept {
    if (ctx.plan.profile.network.mode != NetMode::proxy) return 0;
    sys::UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!sock) return step_fail(ctx, "socket(AF_INET, SOCK_STREAM)");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(proxy::kListenPort);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(sock.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
        return step_fail(ctx, "bind(127.0.0.1:%u)", proxy::kListenPort);
    if (::listen(sock.get(), SOMAXCONN) != 0)
        return step_fail(ctx, "listen(127.0.0.1:%u)", proxy::kListenPort);
    Report report{};
    report.kind = ReportKind::proxy_listener;
    if (sys::send_record(ctx.report_fd, &report, sizeof report, sock.get()) < 0)
        return step_fail(ctx, "sendmsg(report socket, proxy listener)");
    return 0;
}

int step_set_hostname(ChildContext& ctx) noexcept {
    const std::string& name = ctx.plan.hostname;
    if (::sethostname(name.data(), name.size()) != 0)
        return step_fail(ctx, "sethostname(%s)", name.c_str());
    return 0;
}

}  // namespace pysandbox::net
