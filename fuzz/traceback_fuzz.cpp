// The traceback parser: whatever a script writes to stderr, parse_python_exception returns an
// exception or nothing; it never crashes. Written against the interface announced for
// src/traceback.hpp (another branch); CMakeLists.txt keeps it in PYSANDBOX_FUZZ_PENDING_TARGETS
// until that file is merged.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "traceback.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view stderr_text(reinterpret_cast<const char*>(data), size);
    (void)pysandbox::parse_python_exception(stderr_text);
    return 0;
}
