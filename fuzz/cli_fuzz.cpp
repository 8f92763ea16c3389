// The command line: bytes split at NUL into argv, then parse_command_line. CLI11 answers a bad
// command line (and --help, --version) with CLI::ParseError; any other exception, a crash or
// undefined behaviour is a bug.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fronts/cli.hpp"

namespace {

std::vector<std::string> split_words(const std::uint8_t* data, std::size_t size) {
    std::vector<std::string> words{"pysandbox"};
    std::string word;
    for (std::size_t i = 0; i < size; ++i) {
        if (data[i] == '\0') {
            words.push_back(std::move(word));
            word.clear();
        } else {
            word.push_back(static_cast<char>(data[i]));
        }
    }
    words.push_back(std::move(word));
    return words;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::vector<std::string> words = split_words(data, size);
    std::vector<const char*> argv;
    for (const auto& word : words) argv.push_back(word.c_str());
    argv.push_back(nullptr);
    try {
        (void)pysandbox::parse_command_line(static_cast<int>(words.size()), argv.data());
    } catch (const CLI::ParseError&) {
    }
    return 0;
}
