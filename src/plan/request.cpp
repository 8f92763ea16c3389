#include "plan/request.hpp"

#include <filesystem>
#include <stdexcept>

namespace pysandbox {

bool is_plain_name(std::string_view name) {
    return !name.empty() && name != "." && name != ".." &&
           name.find_first_of(std::string_view("/\0", 2)) == std::string_view::npos;
}

InputSpec parse_input_spec(std::string_view spec) {
    const auto eq = spec.rfind('=');
    std::string source(eq == std::string_view::npos ? spec : spec.substr(0, eq));
    std::string name = eq == std::string_view::npos
                           ? std::filesystem::path(source).filename().string()
                           : std::string(spec.substr(eq + 1));
    if (source.empty()) throw std::invalid_argument("\"" + std::string(spec) + "\" names no file");
    if (!is_plain_name(name))
        throw std::invalid_argument("\"" + std::string(spec) +
                                    "\": the name inside must be a plain file name "
                                    "(no '/', not empty, '.' or '..')");
    return {std::move(source), std::move(name)};
}

void check_env_spec(std::string_view spec) {
    const std::string_view name = spec.substr(0, spec.find('='));
    if (name.empty() || name.find_first_of(" \t\n") != std::string_view::npos)
        throw std::invalid_argument("invalid variable name in \"" + std::string(spec) + "\"");
}

}  // namespace pysandbox
