#pragma once
// Landlock, the one optional layer: where the kernel has it, the script may write only beneath
// /tmp and read or execute only beneath the paths the sandbox put there. Where it does not, the
// run goes on and the result says the layer was missing. The rules are decided here, with the
// plan; the child applies them (inside/landlock.hpp).

#include <cstdint>
#include <string>
#include <vector>

namespace pysandbox::landlock {

struct Rule {
    std::string path;  // inside the sandbox
    std::uint64_t access;
};

struct Ruleset {
    int abi = 0;                // 0: the kernel has no Landlock
    std::uint64_t handled = 0;  // every access right this ABI knows
    std::vector<Rule> rules;
};

// The kernel's Landlock ABI version, or 0.
int kernel_abi() noexcept;

// Rules for a sandbox whose read-only content lives at `read_only` and whose writable places are
// `writable`.
Ruleset plan_rules(int abi, const std::vector<std::string>& read_only,
                   const std::vector<std::string>& writable);

}  // namespace pysandbox::landlock
