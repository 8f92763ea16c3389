#pragma once
// One file a run left in /tmp/work, as the result lists it (engine/artifacts.hpp finds them).

#include <cstdint>
#include <optional>
#include <string>

namespace pysandbox::artifacts {

struct Artifact {
    std::string path;  // relative to /tmp/work, '/'-separated
    std::uint64_t size = 0;
    std::optional<std::string> sha256;  // none when a bound (size, bytes, time) was reached
    std::string media_type;
    std::optional<std::string> host_path;  // where --output-dir put it
    // Why it was not copied: exists, too_large, total_limit, time_limit, invalid_name, error.
    std::string skipped;
};

}  // namespace pysandbox::artifacts
