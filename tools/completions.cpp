#include "completions.hpp"

#include <utility>

namespace pysandbox::docs {
namespace {

// 'text' for any shell: single quotes, an embedded quote closed, escaped and reopened.
std::string shell_quoted(std::string_view text) {
    std::string out = "'";
    for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

std::string words(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : " ") + item;
    return out;
}

// What to offer for a value: the kind's name, then the choices for a choice.
std::string kind_words(ValueKind kind, const std::vector<std::string>& choices = {}) {
    switch (kind) {
        case ValueKind::none: return "flag";
        case ValueKind::text: return "text";
        case ValueKind::choice: return "choice " + words(choices);
        case ValueKind::file: return "file";
        case ValueKind::directory: return "directory";
        case ValueKind::profile: return "profile";
    }
    return "text";
}

std::vector<std::string> subcommand_names(const CommandDoc& command) {
    std::vector<std::string> names;
    for (const auto& sub : command.subcommands) names.push_back(sub.name());
    return names;
}

std::vector<std::string> option_spellings(const CommandDoc& command) {
    std::vector<std::string> out;
    for (const auto& option : command.options)
        for (auto& spelling : option.spellings()) out.push_back(std::move(spelling));
    return out;
}

// ---------------------------------------------------------------- bash

using Rows = std::vector<std::pair<std::string, std::string>>;  // case pattern -> REPLY

std::string bash_case_function(std::string_view name, std::string_view comment, const Rows& rows,
                               std::string_view fallback) {
    std::string out = std::string(name) + "() {  # " + std::string(comment) + "\n    case $1 in\n";
    for (const auto& [pattern, reply] : rows)
        out += "        " + pattern + ") REPLY=" + shell_quoted(reply) + " ;;\n";
    return out + "        *) REPLY=" + shell_quoted(fallback) + " ;;\n    esac\n}\n";
}

std::string bash_pattern(const std::vector<std::string>& alternatives) {
    std::string out;
    // Appended piecewise: `"|" + std::string&&` trips GCC 12's -Wrestrict at -O3 (Release).
    for (const auto& alternative : alternatives) {
        if (!out.empty()) out += '|';
        out += shell_quoted(alternative);
    }
    return out;
}

Rows bash_value_kinds(const CommandDoc& root) {
    Rows rows;
    for (const CommandDoc* command : flatten(root))
        for (const auto& option : command->options) {
            if (option.kind == ValueKind::none) continue;
            std::vector<std::string> keys;
            for (const auto& spelling : option.spellings())
                keys.push_back(command->joined(" ") + "|" + spelling);
            rows.emplace_back(bash_pattern(keys), kind_words(option.kind, option.choices));
        }
    return rows;
}

Rows bash_rows(const CommandDoc& root, std::string (*reply)(const CommandDoc&)) {
    Rows rows;
    for (const CommandDoc* command : flatten(root))
        if (std::string value = reply(*command); !value.empty())
            rows.emplace_back(shell_quoted(command->joined(" ")), value);
    return rows;
}

Rows bash_positional_kinds(const CommandDoc& root) {
    Rows rows;
    for (const CommandDoc* command : flatten(root))
        for (std::size_t i = 0; i < command->positionals.size(); ++i)
            rows.emplace_back(shell_quoted(command->joined(" ") + "|" + std::to_string(i)),
                              kind_words(command->positionals[i].kind));
    return rows;
}

// ---------------------------------------------------------------- zsh

// Text inside an _arguments description: brackets and colons are syntax there.
std::string zsh_escaped(std::string_view text, std::string_view specials) {
    std::string out;
    for (char c : text) {
        if (c == '\\' || specials.find(c) != std::string_view::npos) out += '\\';
        out += c;
    }
    return out;
}

std::string zsh_action(ValueKind kind, const std::vector<std::string>& choices) {
    switch (kind) {
        case ValueKind::choice: return "(" + words(choices) + ")";
        case ValueKind::file: return "_files";
        case ValueKind::directory: return "_files -/";
        case ValueKind::profile: return "_pysandbox_profiles";
        case ValueKind::none:
        case ValueKind::text: return " ";
    }
    return " ";
}

// One option: `'(-p --profile)'{-p+,--profile=}'[doc]:PROFILE:action'`.
std::string zsh_option_spec(const OptionDoc& option) {
    std::vector<std::string> forms;
    for (const auto& name : option.short_names)
        forms.push_back("-" + name + (option.kind == ValueKind::none ? "" : "+"));
    for (const auto& name : option.long_names)
        forms.push_back("--" + name + (option.kind == ValueKind::none ? "" : "="));
    std::string lead = option.repeatable  ? "*"
                       : forms.size() > 1 ? "(" + words(option.spellings()) + ")"
                                          : "";
    std::string rest = "[" + zsh_escaped(option.description, "[]") + "]";
    if (option.kind != ValueKind::none)
        rest += ":" + zsh_escaped(option.value_name, ":") + ":" +
                zsh_action(option.kind, option.choices);
    if (forms.size() == 1) return shell_quoted(lead + forms[0] + rest);
    std::string alternatives;
    for (const auto& form : forms) alternatives += (alternatives.empty() ? "" : ",") + form;
    return shell_quoted(lead) + "{" + alternatives + "}" + shell_quoted(rest);
}

std::string zsh_function_name(const CommandDoc& command) {
    return "_pysandbox_cmd" + (command.path.empty() ? "" : "_" + command.joined("_"));
}

std::string zsh_arguments(const CommandDoc& command, const std::vector<std::string>& extra) {
    std::string out = "    _arguments -C -S";
    for (const auto& option : command.options) out += " \\\n        " + zsh_option_spec(option);
    for (const auto& spec : extra) out += " \\\n        " + spec;
    return out;
}

std::string zsh_leaf(const CommandDoc& command) {
    std::vector<std::string> positionals;
    for (std::size_t i = 0; i < command.positionals.size(); ++i) {
        const PositionalDoc& positional = command.positionals[i];
        positionals.push_back(shell_quoted(std::to_string(i + 1) + ":" +
                                           zsh_escaped(positional.value_name, ":") + ":" +
                                           zsh_action(positional.kind, {})));
    }
    return zsh_function_name(command) + "() {\n" + zsh_arguments(command, positionals) + "\n}\n";
}

std::string zsh_dispatcher(const CommandDoc& command) {
    std::string out = zsh_function_name(command) + "() {\n" +
                      "    local curcontext=$curcontext state state_descr line ret=1\n" +
                      "    typeset -A opt_args\n" +
                      zsh_arguments(command, {"': :->command'", "'*:: :->argument'"}) +
                      " && ret=0\n    case $state in\n        command)\n" +
                      "            local -a commands=(\n";
    for (const auto& sub : command.subcommands)
        out += "                " +
               shell_quoted(sub.name() + ":" + zsh_escaped(sub.description, ":")) + "\n";
    out +=
        "            )\n            _describe -t commands command commands && ret=0 ;;\n"
        "        argument)\n            curcontext=${curcontext%:*:*}:pysandbox-$words[1]:\n"
        "            case $words[1] in\n";
    for (const auto& sub : command.subcommands)
        out += "                " + shell_quoted(sub.name()) + ") " + zsh_function_name(sub) +
               " && ret=0 ;;\n";
    return out + "            esac ;;\n    esac\n    return ret\n}\n";
}

// ---------------------------------------------------------------- fish

std::string fish_condition(const CommandDoc& command) {
    return "-n " + shell_quoted(command.path.empty() ? "__pysandbox_at"
                                                     : "__pysandbox_at " + command.joined(" "));
}

std::string fish_value(ValueKind kind, const std::vector<std::string>& choices) {
    switch (kind) {
        case ValueKind::none: return "";
        case ValueKind::text: return " -x";
        case ValueKind::choice: return " -x -a " + shell_quoted(words(choices));
        case ValueKind::file: return " -r -F";
        case ValueKind::directory: return " -x -a '(__fish_complete_directories)'";
        case ValueKind::profile: return " -x -a '(__pysandbox_profiles)'";
    }
    return "";
}

std::string fish_positional(ValueKind kind) {
    switch (kind) {
        case ValueKind::file: return " -F";
        case ValueKind::directory: return " -a '(__fish_complete_directories)'";
        case ValueKind::profile: return " -a '(__pysandbox_profiles)'";
        default: return "";
    }
}

std::string fish_option(const CommandDoc& command, const OptionDoc& option) {
    std::string out = "complete -c pysandbox " + fish_condition(command);
    for (const auto& name : option.short_names) out += " -s " + name;
    for (const auto& name : option.long_names) out += " -l " + name;
    return out + fish_value(option.kind, option.choices) + " -d " +
           shell_quoted(option.description) + "\n";
}

std::string fish_command(const CommandDoc& command) {
    std::string out;
    for (const auto& sub : command.subcommands)
        out += "complete -c pysandbox " + fish_condition(command) + " -f -a " +
               shell_quoted(sub.name()) + " -d " + shell_quoted(sub.description) + "\n";
    for (const auto& option : command.options) out += fish_option(command, option);
    for (const auto& positional : command.positionals)
        if (std::string offer = fish_positional(positional.kind); !offer.empty())
            out += "complete -c pysandbox " + fish_condition(command) + offer + "\n";
    return out;
}

std::string fish_subcommands_function(const CommandDoc& root) {
    std::string out =
        "function __pysandbox_subcommands  # $argv: a command path\n"
        "    switch \"$argv\"\n";
    for (const CommandDoc* command : flatten(root))
        if (!command->subcommands.empty())
            out += "        case " + shell_quoted(command->joined(" ")) + "\n            echo " +
                   words(subcommand_names(*command)) + "\n";
    return out + "    end\nend\n";
}

std::string fish_takes_value_function(const CommandDoc& root) {
    std::string patterns;
    for (const CommandDoc* command : flatten(root))
        for (const auto& option : command->options)
            if (option.kind != ValueKind::none)
                for (const auto& spelling : option.spellings())
                    patterns +=
                        " \\\n            " + shell_quoted(command->joined(" ") + "|" + spelling);
    return "function __pysandbox_takes_value  # $argv[1]: 'path|option'\n"
           "    switch $argv[1]\n        case" +
           patterns +
           "\n            return 0\n    end\n"
           "    return 1\nend\n";
}

}  // namespace

std::string bash_tables(const CommandDoc& root) {
    return bash_case_function(
               "_pysandbox_subcommands", "$1: a command path; REPLY: its subcommands",
               bash_rows(root, [](const CommandDoc& c) { return words(subcommand_names(c)); }),
               "") +
           bash_case_function(
               "_pysandbox_options", "$1: a command path; REPLY: its options",
               bash_rows(root, [](const CommandDoc& c) { return words(option_spellings(c)); }),
               "") +
           bash_case_function("_pysandbox_value_kind",
                              "$1: 'path|option'; REPLY: what its value is (flag: none)",
                              bash_value_kinds(root), "flag") +
           bash_case_function("_pysandbox_positional_kind",
                              "$1: 'path|index'; REPLY: what that positional argument is",
                              bash_positional_kinds(root), "text");
}

std::string zsh_functions(const CommandDoc& root) {
    std::string out;
    for (const CommandDoc* command : flatten(root))
        out +=
            (command->subcommands.empty() ? zsh_leaf(*command) : zsh_dispatcher(*command)) + "\n";
    out.pop_back();
    return out;
}

std::string fish_tables(const CommandDoc& root) {
    std::string out = fish_subcommands_function(root) + fish_takes_value_function(root) +
                      "\ncomplete -c pysandbox -f\n";
    for (const CommandDoc* command : flatten(root)) out += fish_command(*command);
    return out;
}

}  // namespace pysandbox::docs
