#pragma once
// The network namespace starts empty (lo down): "none" needs nothing; "loopback" brings lo up;
// "proxy" brings lo up and opens the proxy's port on it for the supervisor (proxy.hpp).

#include "inside/child.hpp"

namespace pysandbox::net {

int step_configure_network(ChildContext& ctx) noexcept;
int step_open_proxy_port(ChildContext& ctx) noexcept;
int step_set_hostname(ChildContext& ctx) noexcept;

}  // namespace pysandbox::net
