#pragma once
// The command line as data: what the documentation generator reads out of the CLI11 app that
// build_cli() defines, so the man page and the completions cannot name an option the binary lacks.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace pysandbox::docs {

// What the shells should offer for an option's value or a positional argument.
enum class ValueKind { none, text, choice, file, directory, profile };

struct OptionDoc {
    std::vector<std::string> short_names;  // without the dash: "p"
    std::vector<std::string> long_names;   // without the dashes: "profile"
    std::string value_name;                // "PROFILE"; empty for a flag
    std::string description;
    std::string default_value;         // as CLI11 shows it; often empty
    std::vector<std::string> choices;  // from an IsMember check
    ValueKind kind = ValueKind::none;
    bool repeatable = false;
    bool is_help = false;  // CLI11's own -h/--help, present on every command

    std::vector<std::string> spellings() const;  // "-p", "--profile"
};

struct PositionalDoc {
    std::string value_name;  // "SCRIPT"
    std::string description;
    ValueKind kind = ValueKind::text;
    bool required = false;
};

struct CommandDoc {
    std::vector<std::string> path;  // {"profile", "show"}; empty for the program itself
    std::string description;
    std::string footer;
    std::vector<OptionDoc> options;
    std::vector<PositionalDoc> positionals;
    std::vector<CommandDoc> subcommands;

    std::string name() const;                              // the last word of path, or "pysandbox"
    std::string joined(std::string_view separator) const;  // the path, words joined
};

// The whole tree, the program first, subcommands in definition order.
CommandDoc describe(CLI::App& app);

// Every command in the tree, depth first, parents before their subcommands.
std::vector<const CommandDoc*> flatten(const CommandDoc& root);

}  // namespace pysandbox::docs
