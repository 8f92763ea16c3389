#pragma once
// The generated parts of the man pages, as roff: the synopsis and the commands with their options
// (pysandbox.1), and the profile keys (pysandbox-profile.5).

#include <string>
#include <vector>

#include "cli_model.hpp"
#include "plan/profile.hpp"

namespace pysandbox::docs {

std::string man_synopsis(const CommandDoc& root);
std::string man_commands(const CommandDoc& root);
std::string man_profile_keys(const std::vector<KeyDoc>& keys);

}  // namespace pysandbox::docs
