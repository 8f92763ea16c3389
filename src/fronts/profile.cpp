#include "fronts/profile.hpp"

#include <iostream>

#include "plan/profile.hpp"
#include "plan/seccomp.hpp"
#include "sys/errors.hpp"

namespace pysandbox {

int profile_list() {
    for (const auto& [name, file] : list_profiles(profile_search_dirs())) {
        std::string description;
        try {
            description = load_profile(file.string(), profile_search_dirs()).description;
        } catch (const ProfileError& e) {
            description = std::string("(invalid: ") + e.what() + ")";
        }
        std::cout << name << "\t" << description << "\n";
    }
    return 0;
}

int profile_show(const std::string& name) {
    Profile profile = load_profile(name, profile_search_dirs());
    std::cout << "# " << profile.name << ", from:";
    for (const auto& source : profile.sources) std::cout << " " << source.string();
    const auto sockets = profile.network.mode == NetMode::none ? seccomp::Sockets::unix_only
                                                               : seccomp::Sockets::unix_and_inet;
    std::cout << "\n# seccomp allows " << seccomp::allowed_calls(profile.seccomp, sockets).size()
              << " system calls (x86_64); everything else is denied\n"
              << to_toml(profile);
    return 0;
}

}  // namespace pysandbox
