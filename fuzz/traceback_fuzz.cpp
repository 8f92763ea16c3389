// The traceback parser: whatever a script writes to stderr, parse_python_exception returns an
// exception or nothing; it never crashes. The first line of the input doubles as the script's
// name, so frames "in the script" are exercised too.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "report/traceback.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view stderr_text(reinterpret_cast<const char*>(data), size);
    std::string_view script_file = stderr_text.substr(0, stderr_text.find('\n'));
    (void)pysandbox::parse_python_exception(stderr_text, script_file);
    return 0;
}
