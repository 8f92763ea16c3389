// Compiles the seccomp programs of the shipped profiles when pysandbox is built, so that a run of
// one of them reads its program instead of compiling it (half a millisecond of every start):
//
//     pysandbox-prepare-seccomp OUTPUT_DIR PROFILE.toml...
//
// For each profile as shipped, with and without a memory cgroup (the allocation watch differs).
// A run uses a prepared program only when its recipe's fingerprint is the one in the file
// (seccomp.hpp), so a profile changed by flags, or a different pysandbox or libseccomp, compiles
// its own as before.

#include <cstdio>
#include <exception>
#include <filesystem>
#include <vector>

#include "plan/plan.hpp"
#include "plan/profile.hpp"
#include "plan/seccomp.hpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s OUTPUT_DIR PROFILE.toml...\n", argv[0]);
        return 2;
    }
    try {
        const fs::path out = argv[1];
        fs::create_directories(out);
        for (const auto& entry : fs::directory_iterator(out))
            if (entry.path().extension() == ".bpf") fs::remove(entry.path());
        for (int i = 2; i < argc; ++i) {
            const fs::path file = argv[i];
            const std::vector<fs::path> dirs{file.parent_path()};
            const pysandbox::Profile profile = pysandbox::load_profile(file.string(), dirs);
            for (bool memory_cgroup : {false, true}) {
                const auto recipe = pysandbox::seccomp_recipe(profile, memory_cgroup);
                pysandbox::seccomp::write_prepared(out, recipe,
                                                   pysandbox::seccomp::compile(recipe));
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
        return 1;
    }
    return 0;
}
