// pysandbox-gendocs: writes the man pages and the shell completions from the one CLI definition
// (build_cli) and the one profile-key table (profile_keys), filling the hand-written templates.
//
//     pysandbox-gendocs SOURCE_DIR OUTPUT_DIR
//
// reads SOURCE_DIR/man/*.in and SOURCE_DIR/completions/*.in and writes the finished files under
// OUTPUT_DIR/man and OUTPUT_DIR/completions. `cmake --build build --target regen-docs` runs it with
// OUTPUT_DIR = SOURCE_DIR; the docs.generated test runs it into a temporary directory and compares.

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>

#include "cli_model.hpp"
#include "completions.hpp"
#include "fronts/cli.hpp"
#include "man_page.hpp"
#include "plan/profile.hpp"

namespace fs = std::filesystem;
using namespace pysandbox::docs;

namespace {

// A generated file and the template it is made from (relative to the source and output dirs).
struct Output {
    fs::path file;
    std::map<std::string, std::string> parts;  // marker name -> generated text
};

std::string read_text(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + file.string());
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

void write_text(const fs::path& file, const std::string& text) {
    fs::create_directories(file.parent_path());
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) throw std::runtime_error("cannot write " + file.string());
}

std::vector<Output> outputs(const CommandDoc& cli) {
    return {
        {"man/pysandbox.1", {{"SYNOPSIS", man_synopsis(cli)}, {"COMMANDS", man_commands(cli)}}},
        {"man/pysandbox-profile.5", {{"KEYS", man_profile_keys(pysandbox::profile_keys())}}},
        {"completions/pysandbox.bash", {{"TABLES", bash_tables(cli)}}},
        {"completions/_pysandbox", {{"FUNCTIONS", zsh_functions(cli)}}},
        {"completions/pysandbox.fish", {{"TABLES", fish_tables(cli)}}},
    };
}

// The template with each marker line, `.\\" @NAME@` (roff) or `# @NAME@` (shell), replaced by
// the part of that name.
std::string fill(std::string text, const std::map<std::string, std::string>& parts) {
    for (const auto& [name, content] : parts) {
        auto at = text.find(".\\\" @" + name + "@\n");
        if (at == std::string::npos) at = text.find("# @" + name + "@\n");
        if (at == std::string::npos)
            throw std::runtime_error("the template has no marker line for @" + name + "@");
        text.replace(at, text.find('\n', at) + 1 - at, content);
    }
    return text;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::cerr << "usage: pysandbox-gendocs SOURCE_DIR OUTPUT_DIR\n";
        return 2;
    }
    try {
        pysandbox::Invocation unused;
        CommandDoc cli = describe(*pysandbox::build_cli(unused));
        for (const Output& output : outputs(cli)) {
            fs::path source = fs::path(argv[1]) / (output.file.string() + ".in");
            write_text(fs::path(argv[2]) / output.file, fill(read_text(source), output.parts));
        }
    } catch (const std::exception& e) {
        std::cerr << "pysandbox-gendocs: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
