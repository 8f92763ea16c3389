#pragma once
// `pysandbox profile list` and `pysandbox profile show NAME`: the profiles pysandbox finds, and one
// as it resolves (its `extends` chain merged), in TOML.

#include <string>

namespace pysandbox {

int profile_list();
int profile_show(const std::string& name);  // throws ProfileError

}  // namespace pysandbox
