#pragma once
// The generated parts of the shell completions: for each shell, the command tree as that shell's
// code (tables for bash, _arguments specs for zsh, `complete` lines for fish). The hand-written
// logic that reads them lives in the templates completions/*.in.

#include <string>

#include "cli_model.hpp"

namespace pysandbox::docs {

std::string bash_tables(const CommandDoc& root);
std::string zsh_functions(const CommandDoc& root);
std::string fish_tables(const CommandDoc& root);

}  // namespace pysandbox::docs
