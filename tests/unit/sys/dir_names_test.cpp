// remove_tree_at: what it removes is found through descriptors, so neither a link in the tree nor
// its parent directory swapped for a link mid-way turns the removal onto another directory.

#include <doctest/doctest.h>

#include <fcntl.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "sys/dir_names.hpp"

namespace fs = std::filesystem;
using pysandbox::sys::remove_tree_at;
using pysandbox::sys::UniqueFd;

namespace {

void make_tree(const fs::path& dir) {
    fs::create_directories(dir / "sub");
    std::ofstream(dir / "sub" / "file") << "x";
}

}  // namespace

TEST_CASE("remove_tree_at: removes beneath the descriptor, never through a link") {
    std::string pattern = (fs::temp_directory_path() / "dir-names-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    const fs::path base = pattern;
    make_tree(base / "staging" / "leftover");
    make_tree(base / "victim" / "leftover");
    fs::create_directory_symlink(base / "victim", base / "staging" / "leftover" / "link");

    const UniqueFd staging(::open((base / "staging").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(staging);
    // staging/ swapped for a link to the victim after it was opened.
    fs::rename(base / "staging", base / "moved");
    fs::create_directory_symlink(base / "victim", base / "staging");

    remove_tree_at(staging.get(), "leftover");
    CHECK_FALSE(fs::exists(base / "moved" / "leftover"));
    CHECK(fs::exists(base / "victim" / "leftover" / "sub" / "file"));
    fs::remove_all(base);
}
