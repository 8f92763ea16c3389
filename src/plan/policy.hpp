#pragma once
// The Python-aware policy layer: the vocabulary of `policy.deny_calls`, the audit hook installed
// before the script (by sitecustomize.py, from the policy passed as data), and the records that
// hook sends back. This
// layer explains; the kernel layers are the boundary. The hook runs inside the interpreter the
// script controls, so what it reports is the script's word, not the sandbox's.
//
// Pure helpers: they take the policy's values and return text; nothing here touches the system.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pysandbox::policy {

// A profile's [policy] table.
struct Rules {
    std::vector<std::string> deny_imports;  // modules (and their submodules)
    std::vector<std::string> deny_calls;    // names is_known_call() accepts
    std::string incident_log;               // absolute host path, or empty for none

    // Whether the audit hook is wanted at all.
    bool wants_hook() const { return !deny_imports.empty() || !deny_calls.empty(); }
    // The socket rules, which only make sense without a network (the proxy decides otherwise).
    void drop_socket_rules();
};

// The names `policy.deny_calls` accepts.
bool is_known_call(std::string_view name);
std::string known_calls();  // "os.system, os.exec, ..." for error messages and docs

// A dotted module name: identifiers separated by dots ("xml.etree", not "xml..etree" or "1x").
bool is_module_name(std::string_view name);

// Where the sandbox's own modules are, and the fd of the channel the hook reports on: what the
// generated Python is told, so no Python file repeats them.
struct HookSetup {
    std::string_view own_dir;  // "/sandbox/.pysandbox/": frames there are the sandbox's
    int channel_fd;            // the policy channel (policy_channel.hpp), or -1
    // A fork server's zygote (engine/zygote.hpp) installs the hook for the jobs it forks: what
    // it blocks there (the preload's imports) is kept for each job's channel, not reported.
    bool for_jobs = false;
    // Under gVisor, where the interpreter inherits no channel: the socket the hook connects to
    // instead (plan/gvisor.hpp); channel_fd is then unused.
    std::string_view channel_path = {};
};

// The environment variable through which src/python/sitecustomize.py learns the policy; it
// removes it before the script runs.
inline constexpr std::string_view kPolicyVariable = "PYSANDBOX_POLICY";

// The value of kPolicyVariable: the arguments of the hook module's install() that enforce
// `rules`, as one JSON array (which is also a Python literal), or empty when there is no
// [policy] and so no hook.
std::string hook_arguments(const Rules& rules, std::string_view profile_name,
                           const HookSetup& setup);

// The `pysandbox check` analyzer (src/python/pysandbox_check.py) reads the script named by its
// first argument and the policy, as one JSON argument, from its second: this is that argument.
std::string analyzer_argument(const Rules& rules, std::string_view profile_name);

// What the hook reported: its blocks, ("import"|"call", what) -> times, and that it was installed.
// A record is "kind\twhat"; anything else (the script can write to the channel too) is ignored,
// and the blocks are bounded (bounded_counts.hpp): past kMaxDistinct names, (kind, "(others)").
using Blocks = std::map<std::pair<std::string, std::string>, std::uint64_t>;
struct Records {
    Blocks blocks;
    bool hook_installed = false;

    // One record (a line without its newline, or a datagram).
    void add(std::string_view record);
};
// Newline-separated records, the last one complete only with its newline.
Records parse_records(std::string_view text);

}  // namespace pysandbox::policy
