// Replays fuzz inputs without libFuzzer: `NAME_replay FILE_OR_DIR...` feeds every file to the
// target's LLVMFuzzerTestOneInput. Linked with each target by the ordinary (g++) build, so the
// seed corpus and every crash ever found run in the normal test suite, and under the sanitizers
// in a PYSANDBOX_SANITIZE build.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs_under(const fs::path& root) {
    if (!fs::is_directory(root)) return {root};
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(root))
        if (entry.is_regular_file()) files.push_back(entry.path());
    return files;
}

void replay(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + file.string());
    std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t count = 0;
    try {
        for (int i = 1; i < argc; ++i)
            for (const fs::path& file : inputs_under(argv[i])) {
                replay(file);
                ++count;
            }
    } catch (const std::exception& e) {
        std::cerr << argv[0] << ": " << e.what() << "\n";
        return 1;
    }
    if (count == 0) {
        std::cerr << argv[0] << ": no inputs\n";
        return 1;
    }
    std::cout << argv[0] << ": replayed " << count << " inputs\n";
    return 0;
}
