#pragma once
// A directory's entries by name, sorted, without "." and "..": for walks whose order must not
// depend on the order readdir happens to return.

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

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

// Removes `name` from `dir`, a directory with everything in it, never following a link: each
// level is entered through the descriptor of the one above, so a directory swapped for a link
// mid-walk takes nothing outside `dir` with it. Best effort (what cannot be removed stays).
inline void remove_tree_at(int dir, const std::string& name, int depth = 0) {
    constexpr int kMaxDepth = 256;
    if (::unlinkat(dir, name.c_str(), 0) == 0 || errno != EISDIR || depth >= kMaxDepth) return;
    if (const UniqueFd sub(
            ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        sub)
        for (const std::string& inner : sorted_names(sub.get()))
            remove_tree_at(sub.get(), inner, depth + 1);
    ::unlinkat(dir, name.c_str(), AT_REMOVEDIR);
}

}  // namespace pysandbox::sys
