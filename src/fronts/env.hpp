#pragma once
// `pysandbox env`: package environments. `create` runs pip (Debian's python3-pip) inside a
// sandbox of its own: no network, or the proxy with only the index's HOST:PORT allowed; the
// wheelhouse and the requirements copied in as read-only data; the only writable place the
// overlay of a staging directory, bounded in size. What pip wrote comes back as plain files
// (engine/workdir.hpp), is made read-only and hashed, and is published under its hash by one
// rename (plan/env_store.hpp). No package code runs on the host.

#include <string>
#include <vector>

#include "fronts/cli.hpp"

namespace pysandbox::env {

int create(const EnvInvocation& invocation, const std::vector<std::string>& host_env);
int list(const EnvInvocation& invocation, const std::vector<std::string>& host_env);
int show(const EnvInvocation& invocation, const std::vector<std::string>& host_env);
int remove(const EnvInvocation& invocation, const std::vector<std::string>& host_env);
int prune(const EnvInvocation& invocation, const std::vector<std::string>& host_env);

}  // namespace pysandbox::env
