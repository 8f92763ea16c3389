// Arbitrary bytes as a profile: load_profile_text must either return a Profile or throw
// ProfileError. Anything else (another exception, a crash, undefined behaviour) is a bug.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

#include "plan/profile.hpp"
#include "sys/errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // No search directories: a bare `extends` name must fail cleanly, never reach the host's
    // profiles.
    static const std::vector<std::filesystem::path> kNoSearchDirs;
    std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        pysandbox::Profile profile = pysandbox::load_profile_text(text, "fuzz.toml", kNoSearchDirs);
        (void)pysandbox::to_toml(profile);  // what `profile show` prints must not fail either
    } catch (const pysandbox::ProfileError&) {
    }
    return 0;
}
