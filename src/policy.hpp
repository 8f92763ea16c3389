#pragma once
// The Python-aware policy layer: the vocabulary of `policy.deny_calls`, the audit hook installed
// before the script (a generated sitecustomize.py), and the records that hook sends back. This
// layer explains; the kernel layers are the boundary. The hook runs inside the interpreter the
// script controls, so what it reports is the script's word, not the sandbox's.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace pysandbox {
struct Profile;
}

namespace pysandbox::policy {

// The names `policy.deny_calls` accepts.
bool is_known_call(std::string_view name);
std::string known_calls();  // "os.system, os.exec, ..." for error messages and docs

// A dotted module name: identifiers separated by dots ("xml.etree", not "xml..etree" or "1x").
bool is_module_name(std::string_view name);

// The fd the interpreter finds its policy channel on: write-only, on a memfd of fixed size that
// pysandbox reads after the run (supervisor.cpp).
inline constexpr int kPolicyFd = 4;

// sitecustomize.py for kSandboxPythonDir (plan.hpp): installs the audit hook enforcing the
// profile's [policy], from the module below.
std::string sitecustomize_source(const Profile& profile);

// pysandbox_hook.py (src/python/), which the build also compiles into
// share/pysandbox/python/pysandbox_hook.TAG.pyc for __pycache__ beside it.
inline constexpr std::string_view kHookModule = "pysandbox_hook";
std::string_view hook_module_source();

// The `pysandbox check` analyzer: reads the script named by argv[1], prints one JSON object.
std::string analyzer_source(const Profile& profile);

// What the hook reported: its blocks, ("import"|"call", what) -> times, and that it was installed.
// Lines are "kind\twhat\n"; anything else (the script can write to the channel too) is ignored,
// and at most 100 distinct blocks are kept.
using Blocks = std::map<std::pair<std::string, std::string>, std::uint64_t>;
struct Records {
    Blocks blocks;
    bool hook_installed = false;
};
Records parse_records(std::string_view text);

// Whether the profile asks for the audit hook at all.
bool wants_hook(const Profile& profile);

}  // namespace pysandbox::policy
