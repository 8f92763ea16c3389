#include "sys/private_pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older headers lack it
#endif

namespace pysandbox::sys {
namespace {

// Asks for the pages of [start, end) that mincore says are in memory: the others were never
// written (or are the file's still), and populating them would only add memory.
std::size_t own_resident(std::uintptr_t start, std::uintptr_t end, std::size_t page) {
    std::vector<unsigned char> resident((end - start) / page);
    if (::mincore(reinterpret_cast<void*>(start), end - start, resident.data()) != 0) return 0;
    std::size_t asked = 0;
    for (std::size_t first = 0; first < resident.size();) {
        if ((resident[first] & 1) == 0) {
            ++first;
            continue;
        }
        std::size_t last = first;
        while (last < resident.size() && (resident[last] & 1) != 0) ++last;
        if (::madvise(reinterpret_cast<void*>(start + first * page), (last - first) * page,
                      MADV_POPULATE_WRITE) != 0 &&
            errno == EINVAL)
            return asked;  // not this kernel, or not this kind of mapping
        asked += last - first;
        first = last;
    }
    return asked;
}

// Larger private writable mappings are reservations, not a heap: a sanitizer's shadow (terabytes)
// or an allocator's arena, mostly never touched. Scanning one would cost a byte per page of
// address space, far more than the faults it could save; they are left to fault.
constexpr std::uintptr_t kLargestMapping = std::uintptr_t{1} << 30;

}  // namespace

std::size_t own_private_pages() {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::ifstream maps("/proc/self/maps");
    std::size_t asked = 0;
    std::string line;
    while (std::getline(maps, line)) {
        // "start-end perms offset dev inode [path]": private and writable only ("rw-p").
        const std::size_t dash = line.find('-');
        const std::size_t space = line.find(' ');
        if (dash == std::string::npos || space == std::string::npos || dash > space ||
            space + 5 > line.size() || line.compare(space + 1, 4, "rw-p") != 0)
            continue;
        std::uintptr_t start = 0;
        std::uintptr_t end = 0;
        const char* text = line.data();
        if (std::from_chars(text, text + dash, start, 16).ec != std::errc{} ||
            std::from_chars(text + dash + 1, text + space, end, 16).ec != std::errc{} ||
            end <= start || end - start > kLargestMapping)
            continue;
        asked += own_resident(start, end, page);
    }
    return asked;
}

}  // namespace pysandbox::sys
