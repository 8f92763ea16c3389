#pragma once
// Credentials and privileges inside the sandbox: the ids the script runs as, no-new-privs, and no
// capabilities in any set.

#include "inside/child.hpp"

namespace pysandbox::caps {

int step_switch_ids(ChildContext& ctx) noexcept;
int step_join_session_keyring(ChildContext& ctx) noexcept;
int step_set_no_new_privs(ChildContext& ctx) noexcept;
int step_drop_capabilities(ChildContext& ctx) noexcept;

}  // namespace pysandbox::caps
