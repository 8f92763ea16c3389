#include "cli_model.hpp"

#include <algorithm>

namespace pysandbox::docs {
namespace {

// CLI11's full type name is the declared one followed by ":description" per check.
std::string declared_type_name(const std::string& full) { return full.substr(0, full.find(':')); }

// An IsMember check describes itself as "{a,b,c}" inside the full type name.
std::vector<std::string> choices_in(const std::string& full_type_name) {
    auto open = full_type_name.find(":{");
    if (open == std::string::npos) return {};
    auto close = full_type_name.find('}', open);
    std::string list = full_type_name.substr(open + 2, close - open - 2);
    std::vector<std::string> choices;
    for (std::size_t start = 0; start <= list.size();) {
        auto comma = std::min(list.find(',', start), list.size());
        choices.push_back(list.substr(start, comma - start));
        start = comma + 1;
    }
    return choices;
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

OptionDoc describe_option(const CLI::Option& option) {
    OptionDoc doc;
    doc.short_names = option.get_snames();
    doc.long_names = option.get_lnames();
    doc.description = option.get_description();
    doc.default_value = option.get_default_str();
    std::string full_type = option.get_type_name();
    std::string type = declared_type_name(full_type);
    doc.choices = choices_in(full_type);
    doc.kind = kind_of(option, type, !doc.choices.empty());
    if (doc.kind != ValueKind::none) doc.value_name = type.empty() ? "VALUE" : type;
    doc.repeatable = option.get_items_expected_max() > 1;
    return doc;
}

PositionalDoc describe_positional(const CLI::Option& option) {
    std::string full_type = option.get_type_name();
    std::string type = declared_type_name(full_type);
    return {.value_name = type.empty() ? option.get_name(true) : type,
            .description = option.get_description(),
            .kind = kind_of(option, type, !choices_in(full_type).empty()),
            .required = option.get_required()};
}

CommandDoc describe_command(CLI::App& app, std::vector<std::string> path) {
    CommandDoc doc;
    doc.path = std::move(path);
    doc.description = app.get_description();
    doc.footer = app.get_footer();
    for (const CLI::Option* option : app.get_options()) {
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

std::string CommandDoc::name() const { return path.empty() ? "pysandbox" : path.back(); }

std::string CommandDoc::joined(std::string_view separator) const {
    std::string out;
    for (const auto& word : path) out += (out.empty() ? "" : std::string(separator)) + word;
    return out;
}

CommandDoc describe(CLI::App& app) { return describe_command(app, {}); }

std::vector<const CommandDoc*> flatten(const CommandDoc& root) {
    std::vector<const CommandDoc*> out;
    flatten_into(root, out);
    return out;
}

}  // namespace pysandbox::docs
