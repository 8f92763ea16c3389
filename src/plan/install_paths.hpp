#pragma once
// Install paths: where pysandbox finds what was installed with it (the data dir, found from the
// binary's own location so that a build tree works like an install; the files the build prepared
// there) and where profiles are looked up.

#include <filesystem>
#include <string_view>
#include <vector>

namespace pysandbox {

// The data dir installed with the binary (profiles/, matplotlib/ beneath), found from the binary's
// own location so that a build tree works like an install; empty when that cannot be read.
std::filesystem::path installed_data_dir();

// The kernel program installed with the binary (libexec/pysandbox-kernel), which `pysandbox
// kernel` execs; empty when the binary's location cannot be read.
std::filesystem::path installed_kernel_program();

// Where bare profile names are looked up, in order.
std::vector<std::filesystem::path> profile_search_dirs();

// What the build left in share/pysandbox/SUBDIR: the regular files named PREFIX*SUFFIX, by name.
std::vector<std::filesystem::path> built_files(std::string_view subdir, std::string_view prefix,
                                               std::string_view suffix);

}  // namespace pysandbox
