#pragma once
// The network namespace starts empty (lo down): "none" needs nothing; "loopback" brings lo up.

#include "child.hpp"

namespace pysandbox::net {

int step_configure_network(ChildContext& ctx) noexcept;
int step_set_hostname(ChildContext& ctx) noexcept;

}  // namespace pysandbox::net
