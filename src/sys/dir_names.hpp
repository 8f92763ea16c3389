#pragma once
// A directory's entries by name, sorted, without "." and "..": for walks whose order must not
// depend on the order readdir happens to return.

#include <dirent.h>
#include <fcntl.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "sys/unique_fd.hpp"

namespace pysandbox::sys {

// The names in `dir`, read through a fresh open file description (not a dup, which would share
// the read position); none when it cannot be read.
inline std::vector<std::string> sorted_names(int dir) {
    std::vector<std::string> names;
    UniqueFd fd(::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) return names;
    DIR* stream = ::fdopendir(fd.get());
    if (stream == nullptr) return names;
    fd.release();  // the stream owns it now; closedir closes it
    while (const dirent* entry = ::readdir(stream)) {
        const std::string_view name = entry->d_name;
        if (name != "." && name != "..") names.emplace_back(name);
    }
    ::closedir(stream);
    std::sort(names.begin(), names.end());
    return names;
}

}  // namespace pysandbox::sys
