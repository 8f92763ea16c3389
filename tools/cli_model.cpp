#include "cli_model.hpp"

#include <algorithm>

namespace pysandbox::docs {
namespace {

// The descriptions of the option's checks ("{a,b,c}" for an IsMember), in the order CLI11 appends
// them to the declared type name. (CLI11 2.1 has no count of checks: ask by index until it throws.)
std::vector<std::string> check_descriptions(CLI::Option& option) {
    std::vector<std::string> out;
    for (int i = 0;; ++i) {
        try {
            if (std::string text = option.get_validator(i)->get_description(); !text.empty())
                out.push_back(std::move(text));
        } catch (const CLI::OptionNotFound&) {
            return out;
        }
    }
}

// The type name as declared ("HOST:PORT"): CLI11's full one, less ":description" per check.
std::string declared_type_name(CLI::Option& option) {
    std::string full = option.get_type_name();
    std::string checks;
    for (const auto& text : check_descriptions(option)) checks += ":" + text;
    return full.ends_with(checks) ? full.substr(0, full.size() - checks.size()) : full;
}

// An IsMember check describes itself as "{a,b,c}".
std::vector<std::string> choices_of(CLI::Option& option) {
    for (const auto& text : check_descriptions(option)) {
        if (!text.starts_with('{') || !text.ends_with('}')) continue;
        std::vector<std::string> choices;
        std::string list = text.substr(1, text.size() - 2);
        for (std::size_t start = 0; start <= list.size();) {
            auto comma = std::min(list.find(',', start), list.size());
            choices.push_back(list.substr(start, comma - start));
            start = comma + 1;
        }
        return choices;
    }
    return {};
}

bool ends_with_dir(const std::vector<std::string>& long_names) {
    return std::ranges::any_of(long_names, [](const std::string& name) {
        return name.ends_with("dir") || name.ends_with("directory");
    });
}

// Decided from the declared type name (and a *-dir option name), never from a list of options,
// so options added later complete correctly without touching the generator.
ValueKind kind_of(const CLI::Option& option, const std::string& type, bool has_choices) {
    if (option.get_items_expected_max() == 0) return ValueKind::none;
    if (has_choices) return ValueKind::choice;
    if (type == "PROFILE") return ValueKind::profile;
    if (type == "DIR" || ends_with_dir(option.get_lnames())) return ValueKind::directory;
    if (type.starts_with("FILE") || type == "SCRIPT" || type == "PATH") return ValueKind::file;
    return ValueKind::text;
}

OptionDoc describe_option(CLI::Option& option) {
    OptionDoc doc;
    doc.short_names = option.get_snames();
    doc.long_names = option.get_lnames();
    doc.description = option.get_description();
    doc.default_value = option.get_default_str();
    std::string type = declared_type_name(option);
    doc.choices = choices_of(option);
    doc.kind = kind_of(option, type, !doc.choices.empty());
    if (doc.kind != ValueKind::none) doc.value_name = type.empty() ? "VALUE" : type;
    doc.repeatable = option.get_items_expected_max() > 1;
    return doc;
}

PositionalDoc describe_positional(CLI::Option& option) {
    std::string type = declared_type_name(option);
    return {.value_name = type.empty() ? option.get_name(true) : type,
            .description = option.get_description(),
            .kind = kind_of(option, type, !choices_of(option).empty()),
            .required = option.get_required()};
}

CommandDoc describe_command(CLI::App& app, std::vector<std::string> path) {
    CommandDoc doc;
    doc.path = std::move(path);
    doc.description = app.get_description();
    doc.footer = app.get_footer();
    for (CLI::Option* option : app.get_options()) {
        // Hidden from --help (CLI11's empty group: an experimental flag), so from the docs too.
        if (option->get_group().empty()) continue;
        if (option->nonpositional()) {
            doc.options.push_back(describe_option(*option));
            doc.options.back().is_help = option == app.get_help_ptr();
        } else {
            doc.positionals.push_back(describe_positional(*option));
        }
    }
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
        std::vector<std::string> sub_path = doc.path;
        sub_path.push_back(sub->get_name());
        doc.subcommands.push_back(describe_command(*sub, std::move(sub_path)));
    }
    return doc;
}

void flatten_into(const CommandDoc& command, std::vector<const CommandDoc*>& out) {
    out.push_back(&command);
    for (const CommandDoc& sub : command.subcommands) flatten_into(sub, out);
}

}  // namespace

std::vector<std::string> OptionDoc::spellings() const {
    std::vector<std::string> out;
    for (const auto& name : short_names) out.push_back("-" + name);
    for (const auto& name : long_names) out.push_back("--" + name);
    return out;
}

std::string CommandDoc::name() const {
    return path.empty() ? "pysandbox" : path.back();
}

std::string CommandDoc::joined(std::string_view separator) const {
    std::string out;
    for (const auto& word : path) out += (out.empty() ? "" : std::string(separator)) + word;
    return out;
}

CommandDoc describe(CLI::App& app) {
    return describe_command(app, {});
}

std::vector<const CommandDoc*> flatten(const CommandDoc& root) {
    std::vector<const CommandDoc*> out;
    flatten_into(root, out);
    return out;
}

}  // namespace pysandbox::docs
