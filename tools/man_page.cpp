#include "man_page.hpp"

namespace pysandbox::docs {
namespace {

// Text for a roff body line: backslashes escaped, and a leading '.' or '\'' not taken as a request.
std::string text(std::string_view in) {
    std::string out;
    for (char c : in) out += c == '\\' ? std::string("\\e") : std::string(1, c);
    if (out.starts_with('.') || out.starts_with('\'')) out.insert(0, "\\&");
    return out;
}

// A literal word (an option, a value), where every '-' is a minus sign.
std::string literal(std::string_view in) {
    std::string out;
    for (char c : in) {
        if (c == '-')
            out += "\\-";
        else if (c == '\\')
            out += "\\e";
        else
            out += c;
    }
    return out;
}

std::string bold(std::string_view word) {
    return "\\fB" + literal(word) + "\\fR";
}
std::string italic(std::string_view word) {
    return "\\fI" + literal(word) + "\\fR";
}

std::string joined(const std::vector<std::string>& items, std::string_view separator,
                   std::string (*format)(std::string_view)) {
    std::string out;
    for (const auto& item : items)
        out += (out.empty() ? "" : std::string(separator)) + format(item);
    return out;
}

std::string sentence(std::string text_in) {
    if (!text_in.empty() && !text_in.ends_with('.')) text_in += '.';
    return text_in;
}

std::string option_item(const OptionDoc& option) {
    std::string out = ".TP\n" + joined(option.spellings(), ", ", bold);
    if (!option.value_name.empty()) out += " " + italic(option.value_name);
    out += "\n" + text(sentence(option.description));
    if (!option.choices.empty()) out += " One of " + joined(option.choices, ", ", bold) + ".";
    if (!option.default_value.empty()) out += " Default: " + bold(option.default_value) + ".";
    if (option.repeatable) out += " May be given more than once.";
    return out + "\n";
}

std::string positional_item(const PositionalDoc& positional) {
    return ".TP\n" + italic(positional.value_name) + "\n" + text(sentence(positional.description)) +
           "\n";
}

std::string command_words(const CommandDoc& command) {
    return "pysandbox" + (command.path.empty() ? "" : " " + command.joined(" "));
}

bool has_own_options(const CommandDoc& command) {
    for (const auto& option : command.options)
        if (!option.is_help) return true;
    return false;
}

std::string usage_line(const CommandDoc& command) {
    std::string out = bold(command_words(command));
    if (has_own_options(command)) out += " [" + italic("options") + "]";
    for (const auto& positional : command.positionals)
        out += " " + (positional.required ? italic(positional.value_name)
                                          : "[" + italic(positional.value_name) + "]");
    return out;
}

std::string command_section(const CommandDoc& command) {
    std::string out =
        ".SS \"" + command_words(command) + "\"\n" + text(sentence(command.description)) + "\n";
    for (const auto& positional : command.positionals) out += positional_item(positional);
    for (const auto& option : command.options)
        if (!option.is_help || command.path.empty()) out += option_item(option);
    if (!command.footer.empty()) out += ".PP\n" + text(command.footer) + "\n";
    return out;
}

// "limits" for "limits.wall_time"; "" for a top-level key.
std::string_view table_of(std::string_view path) {
    auto dot = path.rfind('.');
    return dot == std::string_view::npos ? std::string_view{} : path.substr(0, dot);
}

std::string key_item(const KeyDoc& key) {
    std::string out = ".TP\n" + bold(key.path) + " (" + text(key.type);
    if (!key.default_value.empty()) out += "; built\\-in default " + bold(key.default_value);
    return out + ")\n" + text(key.doc) + "\n";
}

}  // namespace

std::string man_synopsis(const CommandDoc& root) {
    std::string out;
    for (const CommandDoc* command : flatten(root))
        if (command->subcommands.empty()) out += usage_line(*command) + "\n.br\n";
    for (const auto& option : root.options)
        if (!option.is_help) out += bold("pysandbox " + option.spellings().back()) + "\n.br\n";
    out.resize(out.size() - std::string_view(".br\n").size());
    return out;
}

std::string man_commands(const CommandDoc& root) {
    std::string out;
    for (const CommandDoc* command : flatten(root))
        if (command->subcommands.empty() || has_own_options(*command) || command->path.empty())
            out += command_section(*command);
    return out;
}

std::string man_profile_keys(const std::vector<KeyDoc>& keys) {
    std::string out;
    std::string_view current_table = "\n";  // no table has this name
    for (const auto& key : keys) {
        if (std::string_view table = table_of(key.path); table != current_table) {
            out += ".SS " +
                   (table.empty() ? std::string("\"Top level\"") : "[" + std::string(table) + "]") +
                   "\n";
            current_table = table;
        }
        out += key_item(key);
    }
    return out;
}

}  // namespace pysandbox::docs
