#include "plan/profile.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <toml++/toml.h>

#include "plan/host_files.hpp"
#include "plan/policy.hpp"
#include "plan/spelling.hpp"
#include "plan/toml_prescan.hpp"
#include "plan/units.hpp"
#include "sys/errors.hpp"

namespace pysandbox {
namespace fs = std::filesystem;
namespace {

// One profile key: how to validate-and-set it, and how to show it. The table below is the single
// source for validation, `profile show`, and the profile documentation.
struct KeySpec {
    std::string_view path;
    std::string_view type;
    std::string_view doc;
    std::function<void(const toml::node&, Profile&)> set;  // throws std::invalid_argument
    // Takes the profile non-const only because the accessors do; it changes nothing.
    std::function<void(Profile&, toml::table&, const std::string&)> show;
};

// A bad value somewhere inside a table- or array-valued key: names the inner key (".NAME") or
// element ("[N]") and points at it.
struct NestedValueError : std::invalid_argument {
    NestedValueError(std::string where_inside, toml::source_region where, const std::string& what)
        : std::invalid_argument(what), suffix(std::move(where_inside)), region(where) {}
    std::string suffix;
    toml::source_region region;
};

std::string type_name(const toml::node& node) {
    std::ostringstream out;
    out << node.type();
    return out.str();
}

const std::string& expect_string(const toml::node& node) {
    if (!node.is_string())
        throw std::invalid_argument("expected a string, found " + type_name(node));
    return node.as_string()->get();
}

std::vector<std::string> expect_string_list(const toml::node& node) {
    const toml::array* array = node.as_array();
    if (array == nullptr)
        throw std::invalid_argument("expected an array of strings, found " + type_name(node));
    std::vector<std::string> out;
    for (const toml::node& item : *array) out.push_back(expect_string(item));
    return out;
}

toml::array to_array(const std::vector<std::string>& items) {
    toml::array array;
    for (const auto& item : items) array.push_back(item);
    return array;
}

template <typename T>
using Accessor = T& (*)(Profile&);

// Accessors for the key table: at<&Profile::description>, at<&Profile::limits, &Limits::memory>.
template <auto Member>
constexpr auto& at(Profile& p) {
    return p.*Member;
}
template <auto Outer, auto Inner>
constexpr auto& at(Profile& p) {
    return (p.*Outer).*Inner;
}

KeySpec duration_key(std::string_view path, std::string_view doc,
                     Accessor<std::chrono::milliseconds> field) {
    return {path, "duration", doc,
            [field](const toml::node& n, Profile& p) {
                field(p) = parse_limit_duration(expect_string(n));
            },
            [field](Profile& p, toml::table& t, const std::string& leaf) {
                t.insert_or_assign(leaf, units::format_duration(field(p)));
            }};
}

KeySpec size_key(std::string_view path, std::string_view doc, Accessor<std::uint64_t> field,
                 std::uint64_t minimum = 0) {
    return {path, "size", doc,
            [field, minimum](const toml::node& n, Profile& p) {
                field(p) = parse_limit_size(expect_string(n), minimum);
            },
            [field](Profile& p, toml::table& t, const std::string& leaf) {
                t.insert_or_assign(leaf, units::format_size(field(p)));
            }};
}

KeySpec count_key(std::string_view path, std::string_view doc, Accessor<std::uint64_t> field) {
    return {path, "integer", doc,
            [field](const toml::node& n, Profile& p) {
                auto value = n.value_exact<std::int64_t>();
                if (!value)
                    throw std::invalid_argument("expected an integer, found " + type_name(n));
                if (*value < 1) throw std::invalid_argument("must be at least 1");
                field(p) = static_cast<std::uint64_t>(*value);
            },
            [field](Profile& p, toml::table& t, const std::string& leaf) {
                t.insert_or_assign(leaf, static_cast<std::int64_t>(field(p)));
            }};
}

KeySpec string_key(std::string_view path, std::string_view doc, Accessor<std::string> field) {
    return {path, "string", doc,
            [field](const toml::node& n, Profile& p) { field(p) = expect_string(n); },
            [field](Profile& p, toml::table& t, const std::string& leaf) {
                t.insert_or_assign(leaf, field(p));
            }};
}

// A host path that must be absolute (a profile is not tied to the caller's directory); empty
// means none.
KeySpec absolute_path_key(std::string_view path, std::string_view doc,
                          Accessor<std::string> field) {
    return {path, "string", doc,
            [field](const toml::node& n, Profile& p) {
                std::string value = expect_string(n);
                if (!value.empty() && value.front() != '/')
                    throw std::invalid_argument("\"" + value + "\" must be an absolute path");
                field(p) = std::move(value);
            },
            [field](Profile& p, toml::table& t, const std::string& leaf) {
                t.insert_or_assign(leaf, field(p));
            }};
}

KeySpec bool_key(std::string_view path, std::string_view doc, Accessor<bool> field) {
    return {path, "boolean", doc,
            [field](const toml::node& n, Profile& p) {
                auto value = n.value_exact<bool>();
                if (!value)
                    throw std::invalid_argument("expected true or false, found " + type_name(n));
                field(p) = *value;
            },
            [field](Profile& p, toml::table& t, const std::string& leaf) {
                t.insert_or_assign(leaf, field(p));
            }};
}

std::vector<std::string> expect_syscall_list(const toml::node& node) {
    std::vector<std::string> names = expect_string_list(node);
    for (const auto& name : names)
        if (!seccomp::is_known_syscall(name))
            throw std::invalid_argument("unknown system call \"" + name + "\"");
    return names;
}

KeySpec syscall_list_key(std::string_view path, std::string_view doc,
                         Accessor<std::vector<std::string>> field) {
    return {path, "array of system call names", doc,
            [field](const toml::node& n, Profile& p) { field(p) = expect_syscall_list(n); },
            [field](Profile& p, toml::table& t, const std::string& leaf) {
                t.insert_or_assign(leaf, to_array(field(p)));
            }};
}

KeySpec list_key(std::string_view path, std::string_view doc,
                 Accessor<std::vector<std::string>> field) {
    return {path, "array of strings", doc,
            [field](const toml::node& n, Profile& p) { field(p) = expect_string_list(n); },
            [field](Profile& p, toml::table& t, const std::string& leaf) {
                t.insert_or_assign(leaf, to_array(field(p)));
            }};
}

// Each entry must parse as an allowlist rule; a bad one is reported at its own line and column.
proxy::Allowlist expect_allow_list(const toml::node& node) {
    std::vector<std::string> entries = expect_string_list(node);
    const toml::array& array = *node.as_array();
    proxy::Allowlist allowlist;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        try {
            allowlist.add(proxy::parse_allow_rule(entries[i]));
        } catch (const std::invalid_argument& e) {
            throw NestedValueError("[" + std::to_string(i) + "]", array[i].source(),
                                   "\"" + entries[i] + "\": " + e.what());
        }
    }
    return allowlist;
}

// A list whose every entry passes `valid`; a bad one is reported at its own line and column.
template <typename Valid>
KeySpec checked_list_key(std::string_view path, std::string_view doc,
                         Accessor<std::vector<std::string>> field, Valid valid) {
    return {path, "array of strings", doc,
            [field, valid](const toml::node& n, Profile& p) {
                std::vector<std::string> entries = expect_string_list(n);
                for (std::size_t i = 0; i < entries.size(); ++i)
                    if (std::string problem = valid(entries[i]); !problem.empty())
                        throw NestedValueError("[" + std::to_string(i) + "]",
                                               (*n.as_array())[i].source(),
                                               "\"" + entries[i] + "\": " + problem);
                field(p) = std::move(entries);
            },
            [field](Profile& p, toml::table& t, const std::string& leaf) {
                t.insert_or_assign(leaf, to_array(field(p)));
            }};
}

// The value a table of names (kNetModes, kKernels) gives `text`; else invalid_argument naming
// every one.
template <typename Table>
auto parse_named(const Table& table, const std::string& text) {
    std::string names;
    for (const auto& [value, name] : table) {
        if (name == text) return value;
        names += (names.empty() ? "\"" : ", \"") + std::string(name) + "\"";
    }
    throw std::invalid_argument("expected one of " + names + "; found \"" + text + "\"");
}

void add_top_keys(std::vector<KeySpec>& keys) {
    keys.push_back({"extends",
                    "string",
                    "Profile this one builds on: a name, or a path relative to this file; "
                    "without it, default; \"\" starts from the built-in defaults.",
                    [](const toml::node& n, Profile&) { expect_string(n); },
                    {}});
    keys.push_back(string_key("description", "One line saying what the profile is for.",
                              at<&Profile::description>));
}

void add_limit_keys(std::vector<KeySpec>& keys) {
    keys.push_back(duration_key("limits.wall_time",
                                "Wall-clock limit; the sandbox is killed and exits 124. In a "
                                "session, the longest a cell may run.",
                                at<&Profile::limits, &Limits::wall_time>));
    keys.push_back(duration_key("limits.cpu_time",
                                "CPU time limit of the script (of all cells together in a "
                                "session).",
                                at<&Profile::limits, &Limits::cpu_time>));
    keys.push_back(size_key("limits.memory", "Memory limit (address space without cgroups).",
                            at<&Profile::limits, &Limits::memory>, kMinMemory));
    keys.push_back(count_key("limits.max_procs", "Processes and threads, together.",
                             at<&Profile::limits, &Limits::max_procs>));
    keys.push_back(count_key("limits.cpus",
                             "CPUs the script may run on (affinity), and the thread count "
                             "given to OpenMP, OpenBLAS, MKL and numexpr.",
                             at<&Profile::limits, &Limits::cpus>));
    keys.push_back(count_key("limits.open_files", "Open file descriptors per process.",
                             at<&Profile::limits, &Limits::open_files>));
    keys.push_back(count_key("limits.pending_signals",
                             "Signals queued to the sandbox's processes (RLIMIT_SIGPENDING): they "
                             "count against the host user's limit too.",
                             at<&Profile::limits, &Limits::pending_signals>));
    keys.push_back(count_key("limits.inotify_instances",
                             "inotify instances of the sandbox, taken from the host user's "
                             "(fs.inotify.max_user_instances).",
                             at<&Profile::limits, &Limits::inotify_instances>));
    keys.push_back(count_key("limits.inotify_watches",
                             "inotify watches of the sandbox, taken from the host user's "
                             "(fs.inotify.max_user_watches).",
                             at<&Profile::limits, &Limits::inotify_watches>));
    keys.push_back(size_key("limits.file_size", "Largest file the script may write.",
                            at<&Profile::limits, &Limits::file_size>));
    keys.push_back(size_key("limits.tmp_size",
                            "Size of the writable /tmp; with --workdir, also what the script may "
                            "write there.",
                            at<&Profile::limits, &Limits::tmp_size>, kMinTmpSize));
    keys.push_back(size_key("limits.output_limit",
                            "Bytes of stdout and stderr kept (of a run; of each session cell).",
                            at<&Profile::limits, &Limits::output_limit>));
    keys.push_back(duration_key("limits.idle_timeout",
                                "A session ends when no request came for this long.",
                                at<&Profile::limits, &Limits::idle_timeout>));
    keys.push_back(duration_key("limits.lifetime",
                                "A session ends this long after it started, a cell still running "
                                "included.",
                                at<&Profile::limits, &Limits::lifetime>));
    keys.push_back(size_key("limits.artifact_size",
                            "Largest artifact hashed or copied to the host; bigger ones are listed "
                            "without a hash (with --output-dir: \"skipped\": \"too_large\").",
                            at<&Profile::limits, &Limits::artifact_size>));
    keys.push_back(size_key("limits.artifacts_total",
                            "Bytes read to hash and copy the artifacts, in all; past it files are "
                            "listed without a hash (with --output-dir: \"skipped\": "
                            "\"total_limit\").",
                            at<&Profile::limits, &Limits::artifacts_total>));
}

void add_network_keys(std::vector<KeySpec>& keys) {
    keys.push_back({"network.mode", "string",
                    "\"none\" (nothing reachable), \"loopback\" (lo up inside) or \"proxy\".",
                    [](const toml::node& n, Profile& p) {
                        p.network.mode = parse_named(kNetModes, expect_string(n));
                    },
                    [](Profile& p, toml::table& t, const std::string& leaf) {
                        t.insert_or_assign(leaf, std::string(to_string(p.network.mode)));
                    }});
    keys.push_back({"network.allow", "array of HOST:PORT",
                    "Destinations the proxy lets through: host:port, *.domain:port "
                    "(subdomains only), 1.2.3.4:port, [::1]:port.",
                    [](const toml::node& n, Profile& p) { p.network.allow = expect_allow_list(n); },
                    [](Profile& p, toml::table& t, const std::string& leaf) {
                        t.insert_or_assign(leaf, to_array(p.network.allow.entries()));
                    }});
}

void add_sandbox_keys(std::vector<KeySpec>& keys) {
    keys.push_back(
        {"sandbox.kernel", "string",
         "Which kernel answers the script's system calls: \"host\" (the host's, behind "
         "seccomp and Landlock) or \"gvisor\" (gVisor's runsc, a kernel in user space in "
         "between; run and check only).",
         [](const toml::node& n, Profile& p) {
             p.kernel = parse_named(kKernels, expect_string(n));
         },
         [](Profile& p, toml::table& t, const std::string& leaf) {
             t.insert_or_assign(leaf, std::string(to_string(p.kernel)));
         }});
}

KeySpec env_set_key() {
    return {
        "env.set", "table of strings",
        "Variables set inside the sandbox (the environment starts empty).",
        [](const toml::node& n, Profile& p) {
            const toml::table* table = n.as_table();
            if (table == nullptr)
                throw std::invalid_argument("expected a table of strings, found " + type_name(n));
            for (auto&& [key, value] : *table) {
                try {
                    p.env_set[std::string(key.str())] = expect_string(value);
                } catch (const std::invalid_argument& e) {
                    throw NestedValueError("." + std::string(key.str()), value.source(), e.what());
                }
            }
        },
        [](Profile& p, toml::table& t, const std::string& leaf) {
            toml::table vars;
            for (const auto& [name, value] : p.env_set) vars.insert_or_assign(name, value);
            t.insert_or_assign(leaf, std::move(vars));
        }};
}

void add_program_keys(std::vector<KeySpec>& keys) {
    keys.push_back(list_key("filesystem.ro",
                            "Host paths bound read-only at the same place inside; missing "
                            "ones are skipped.",
                            at<&Profile::ro_paths>));
    keys.push_back(string_key("python.interpreter", "Absolute path of the interpreter.",
                              at<&Profile::interpreter>));
    keys.push_back(list_key("python.args", "Interpreter options placed before the script.",
                            at<&Profile::interpreter_args>));
    keys.push_back(checked_list_key(
        "python.preload",
        "Modules imported when a session's, the MCP server's or a batch's sandbox starts, before "
        "any code arrives (a sandbox started ahead of need has them ready); one that fails to "
        "import is reported in the first result's warnings. `run` does not preload, nor does "
        "`batch --no-preload`.",
        at<&Profile::preload>, [](const std::string& name) {
            return policy::is_module_name(name) ? std::string() : std::string("not a module name");
        }));
    keys.push_back(checked_list_key(
        "python.requirements",
        "Packages the script gets (requirements, as pip takes them), installed by pip inside a "
        "sandbox into a package environment made once and reused, and mounted read-only: by "
        "`run` with its --with and the script's inline metadata; by `session`, `batch`, `mcp` "
        "and `kernel` before they serve, into every sandbox they start. --with-env names an "
        "environment in their place; `check` refuses a profile that names them.",
        at<&Profile::requirements>, [](const std::string& spec) {
            return spec.empty() || spec.starts_with('-') ||
                           spec.find_first_of("\r\n") != std::string::npos
                       ? std::string("not a requirement (pip options are not taken here)")
                       : std::string();
        }));
    keys.push_back(checked_list_key(
        "python.find_links",
        "Wheelhouse directories (absolute paths) python.requirements install from (run's "
        "--find-links replaces them).",
        at<&Profile::find_links>, [](const std::string& dir) {
            return dir.starts_with('/') ? std::string() : std::string("not an absolute path");
        }));
    keys.push_back(string_key("python.index_url",
                              "The package index python.requirements install from (run's "
                              "--index-url replaces it); empty: none with find_links, else "
                              "https://pypi.org/simple.",
                              at<&Profile::index_url>));
    keys.push_back(env_set_key());
    keys.push_back(
        list_key("env.pass", "Host variables copied in when set.", at<&Profile::env_pass>));
}

void add_seccomp_keys(std::vector<KeySpec>& keys) {
    keys.push_back({"seccomp.action", "string",
                    "What a system call outside the allowlist does: \"errno\" (the errno a "
                    "refusing kernel gives, mostly EPERM) or \"kill\" (the sandbox ends).",
                    [](const toml::node& n, Profile& p) {
                        const std::string& action = expect_string(n);
                        if (action != "errno" && action != "kill")
                            throw std::invalid_argument("expected \"errno\" or \"kill\"; found \"" +
                                                        action + "\"");
                        p.seccomp.kill = action == "kill";
                    },
                    [](Profile& p, toml::table& t, const std::string& leaf) {
                        t.insert_or_assign(leaf, p.seccomp.kill ? "kill" : "errno");
                    }});
    keys.push_back(
        {"seccomp.base", "string",
         "The allowlist a profile starts from: \"standard\" (what the standard "
         "library needs) or \"minimal\" (computation: no sockets, no changes to "
         "file owners, modes or links).",
         [](const toml::node& n, Profile& p) {
             const std::string& base = expect_string(n);
             if (base != "standard" && base != "minimal")
                 throw std::invalid_argument("expected \"standard\" or \"minimal\"; found \"" +
                                             base + "\"");
             p.seccomp.base = base == "minimal" ? seccomp::Base::minimal : seccomp::Base::standard;
         },
         [](Profile& p, toml::table& t, const std::string& leaf) {
             t.insert_or_assign(leaf,
                                p.seccomp.base == seccomp::Base::minimal ? "minimal" : "standard");
         }});
    keys.push_back(bool_key("seccomp.allow_processes",
                            "Add process creation to the allowlist: fork, vfork, clone of "
                            "processes (up to limits.max_procs), with a /dev/shm (a tmpfs of "
                            "limits.tmp_size) for multiprocessing's locks and queues.",
                            at<&Profile::seccomp, &seccomp::Settings::allow_processes>));
    keys.push_back(syscall_list_key("seccomp.deny", "System calls taken out of the allowlist.",
                                    at<&Profile::seccomp, &seccomp::Settings::deny>));
    keys.push_back(syscall_list_key(
        "seccomp.allow",
        "System calls added to the allowlist, whatever their arguments (each widens what the "
        "script can ask of the host's kernel: see pysandbox(1), SYSTEM CALLS).",
        at<&Profile::seccomp, &seccomp::Settings::allow>));
}

void add_policy_keys(std::vector<KeySpec>& keys) {
    keys.push_back(checked_list_key(
        "policy.deny_imports",
        "Modules the audit hook refuses to import (submodules too) and `check` reports; "
        "socket only while network.mode is none.",
        at<&Profile::policy, &policy::Rules::deny_imports>, [](const std::string& name) {
            return policy::is_module_name(name) ? std::string() : std::string("not a module name");
        }));
    static const std::string kDenyCallsDoc =
        "Operations the audit hook refuses and `check` reports: " + policy::known_calls() +
        "; the socket ones only while network.mode is none.";
    keys.push_back(checked_list_key(
        "policy.deny_calls", kDenyCallsDoc, at<&Profile::policy, &policy::Rules::deny_calls>,
        [](const std::string& name) {
            return policy::is_known_call(name)
                       ? std::string()
                       : "unknown call name (known: " + policy::known_calls() + ")";
        }));
    keys.push_back(absolute_path_key(
        "policy.incident_log",
        "Host file (absolute path) to which every run or check that was blocked appends one "
        "JSON line; --incident-log overrides it. Empty: no log.",
        at<&Profile::policy, &policy::Rules::incident_log>));
}

const std::vector<KeySpec>& key_specs() {
    static const std::vector<KeySpec> kKeys = [] {
        std::vector<KeySpec> keys;
        add_top_keys(keys);
        add_limit_keys(keys);
        add_network_keys(keys);
        add_sandbox_keys(keys);
        add_program_keys(keys);
        add_seccomp_keys(keys);
        add_policy_keys(keys);
        return keys;
    }();
    return kKeys;
}

const KeySpec* find_key(std::string_view path) {
    for (const auto& key : key_specs())
        if (key.path == path) return &key;
    return nullptr;
}

bool is_table_prefix(std::string_view path) {
    std::string prefix = std::string(path) + ".";
    return std::ranges::any_of(key_specs(),
                               [&](const KeySpec& k) { return k.path.starts_with(prefix); });
}

std::vector<std::string> keys_under(std::string_view prefix) {
    std::set<std::string> names;
    for (const auto& key : key_specs()) {
        std::string_view path = key.path;
        if (!prefix.empty()) {
            if (!path.starts_with(prefix) || path.size() <= prefix.size() ||
                path[prefix.size()] != '.')
                continue;
            path.remove_prefix(prefix.size() + 1);
        }
        names.emplace(path.substr(0, path.find('.')));
    }
    return {names.begin(), names.end()};
}

// "unknown key; did you mean limits.wall_time?", or the keys the table accepts when no name is
// close.
std::string unknown_key_message(std::string_view prefix, std::string_view key) {
    const std::vector<std::string> known = keys_under(prefix);
    const std::string scope = prefix.empty() ? "" : std::string(prefix) + ".";
    if (const std::optional<std::string> near = spelling::nearest(key, known))
        return "unknown key; did you mean " + scope + *near + "?";
    std::string list;
    for (const auto& name : known) list += (list.empty() ? "" : ", ") + name;
    return "unknown key" +
           (prefix.empty() ? " (known: " : " ([" + std::string(prefix) + "] accepts: ") + list +
           ")";
}

std::string where(const fs::path& file, const toml::source_region& region) {
    return file.string() + ":" + std::to_string(region.begin.line) + ":" +
           std::to_string(region.begin.column);
}

// Checks every key of one file against the key table by applying it to a scratch profile, so a
// file is wholly valid on its own before it is merged into a chain.
void validate(const toml::table& table, const fs::path& file, const std::string& prefix) {
    Profile scratch;
    for (auto&& [key, node] : table) {
        std::string path =
            prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
        if (const KeySpec* spec = find_key(path)) {
            try {
                spec->set(node, scratch);
            } catch (const NestedValueError& e) {
                throw ProfileError(where(file, e.region) + ": " + path + e.suffix + ": " +
                                   e.what());
            } catch (const std::invalid_argument& e) {
                throw ProfileError(where(file, node.source()) + ": " + path + ": " + e.what());
            }
        } else if (node.is_table() && is_table_prefix(path)) {
            validate(*node.as_table(), file, path);
        } else {
            throw ProfileError(where(file, key.source()) + ": " + path + ": " +
                               unknown_key_message(prefix, key.str()));
        }
    }
}

// Tables merge key by key; anything else (lists included) is replaced by the overlay.
void merge_into(toml::table& base, const toml::table& overlay) {
    for (auto&& [key, node] : overlay) {
        toml::node* existing = base.get(key);
        if (existing && existing->is_table() && node.is_table() &&
            !find_key(std::string(key.str())))
            merge_into(*existing->as_table(), *node.as_table());
        else
            base.insert_or_assign(key, node);
    }
}

void apply(const toml::table& table, const std::string& prefix, Profile& profile) {
    for (auto&& [key, node] : table) {
        std::string path =
            prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
        if (const KeySpec* spec = find_key(path))
            spec->set(node, profile);
        else if (node.is_table())
            apply(*node.as_table(), path, profile);
    }
}

toml::table parse(std::string_view text, const fs::path& origin) {
    if (auto error = prescan_toml(text))
        throw ProfileError(origin.string() + ":" + std::to_string(error->line) + ":" +
                           std::to_string(error->column) + ": " + error->message);
    try {
        return toml::parse(text, origin.string());
    } catch (const toml::parse_error& e) {
        throw ProfileError(where(origin, e.source()) + ": " + std::string(e.description()));
    }
}

std::string read_profile_file(const fs::path& file) {
    constexpr std::uint64_t kMaxProfileBytes = 1 << 20;
    HostFile profile = read_host_file(file.string(), kMaxProfileBytes);
    switch (profile.problem) {
        case HostFile::Problem::none: break;
        case HostFile::Problem::directory: throw ProfileError(file.string() + ": is a directory");
        case HostFile::Problem::not_regular:
            throw ProfileError(file.string() + ": not a regular file");
        case HostFile::Problem::too_large:
            throw ProfileError(file.string() + ": larger than 1 MiB; not a profile");
        case HostFile::Problem::open:
        case HostFile::Problem::read:
            throw ProfileError(file.string() + ": " + std::strerror(profile.error));
    }
    return std::move(profile.data);
}

struct Chain {
    toml::table merged;
    std::vector<fs::path> sources;
};

// What a profile without `extends` builds on: the profile named default, unless this file is
// it, or no default can be found (a profile read on its own, with no search directories).
std::string implicit_base(const fs::path& origin, std::span<const fs::path> search_dirs) {
    fs::path found;
    try {
        found = find_profile("default", search_dirs);
    } catch (const ProfileError&) {
        return {};
    }
    std::error_code ec;  // an origin that is no file (a profile given as text) is not default
    const bool is_default = fs::equivalent(found, origin, ec);
    return is_default && !ec ? "" : "default";
}

Chain load_chain(std::string_view text, const fs::path& origin,
                 std::span<const fs::path> search_dirs, std::set<fs::path>& visited) {
    toml::table table = parse(text, origin);
    validate(table, origin, "");
    Chain chain;
    const toml::node* extends = table.get("extends");
    const std::string ref =
        extends ? extends->as_string()->get() : implicit_base(origin, search_dirs);
    const std::string at = extends ? where(origin, extends->source()) : origin.string();
    if (!ref.empty()) {
        fs::path base_file;
        try {
            base_file = ref.find('/') != std::string::npos
                            ? (fs::absolute(origin).parent_path() / ref).lexically_normal()
                            : find_profile(ref, search_dirs);
        } catch (const ProfileError& e) {
            throw ProfileError(at + ": extends: " + e.what());
        }
        // A path the host cannot look at (too long, not searchable) is the profile's error.
        std::error_code ec;
        fs::path canonical = fs::weakly_canonical(base_file, ec);
        if (ec || !fs::exists(base_file, ec))
            throw ProfileError(at + ": extends: profile file " + base_file.string() +
                               (ec ? ": " + ec.message() : " not found"));
        if (!visited.insert(canonical).second)
            throw ProfileError(at + ": extends: \"" + ref + "\" makes a cycle");
        chain = load_chain(read_profile_file(base_file), base_file, search_dirs, visited);
    }
    table.erase("extends");
    merge_into(chain.merged, table);
    chain.sources.insert(chain.sources.begin(), origin);
    return chain;
}

Profile build(Chain chain, std::string_view ref) {
    Profile profile;
    profile.name = std::string(ref);
    apply(chain.merged, "", profile);
    profile.sources = std::move(chain.sources);
    return profile;
}

// A value as it would be written in a profile, tables inline.
std::string toml_value_text(toml::node& value) {
    if (toml::table* table = value.as_table()) table->is_inline(true);
    std::ostringstream out;
    value.visit([&out](auto& typed) { out << typed; });
    std::string text = out.str();
    return text.empty() ? "{}" : text;
}

// What the key shows for a Profile no file has touched: the struct defaults, written once.
std::string default_value_of(const KeySpec& key) {
    if (!key.show) return {};
    Profile defaults;
    toml::table shown;
    key.show(defaults, shown, "value");
    return toml_value_text(*shown.get("value"));
}

}  // namespace

std::string_view to_string(NetMode mode) {
    for (const auto& entry : kNetModes)
        if (entry.mode == mode) return entry.name;
    return "none";
}

std::optional<NetMode> net_mode_named(std::string_view name) {
    for (const auto& entry : kNetModes)
        if (entry.name == name) return entry.mode;
    return std::nullopt;
}

std::string_view to_string(KernelChoice kernel) {
    for (const auto& entry : kKernels)
        if (entry.kernel == kernel) return entry.name;
    return "host";
}

std::optional<KernelChoice> kernel_named(std::string_view name) {
    for (const auto& entry : kKernels)
        if (entry.name == name) return entry.kernel;
    return std::nullopt;
}

std::chrono::milliseconds parse_limit_duration(std::string_view text) {
    auto value = units::parse_duration(text);
    if (value.count() <= 0) throw std::invalid_argument("must be more than 0");
    return value;
}

std::uint64_t parse_limit_size(std::string_view text, std::uint64_t minimum) {
    auto value = units::parse_size(text);
    if (value < minimum)
        throw std::invalid_argument("at least " + units::format_size(minimum) + " is needed");
    return value;
}

namespace {

std::vector<std::string> profile_names(std::span<const fs::path> search_dirs) {
    std::vector<std::string> names;
    for (const auto& [name, file] : list_profiles(search_dirs)) names.push_back(name);
    return names;
}

}  // namespace

fs::path find_profile(std::string_view ref, std::span<const fs::path> search_dirs) {
    if (ref.find('/') != std::string_view::npos) {
        fs::path file(ref);
        std::error_code ec;
        if (!fs::exists(file, ec))
            throw ProfileError("profile file " + file.string() +
                               (ec ? ": " + ec.message() : " not found"));
        return file;
    }
    if (ref.empty() || ref.starts_with('.'))
        throw ProfileError("invalid profile name \"" + std::string(ref) + "\"");
    std::string tried;
    for (const auto& dir : search_dirs) {
        fs::path file = dir / (std::string(ref) + ".toml");
        std::error_code ec;
        if (fs::exists(file, ec)) return file;
        tried += (tried.empty() ? "" : ", ") + dir.string();
    }
    const std::optional<std::string> near = spelling::nearest(ref, profile_names(search_dirs));
    throw ProfileError("profile \"" + std::string(ref) + "\" not found (looked in " + tried +
                       "; a path with '/' names a file)" +
                       (near ? "; did you mean \"" + *near + "\"?" : ""));
}

Profile load_profile(std::string_view ref, std::span<const fs::path> search_dirs) {
    fs::path file = find_profile(ref, search_dirs);
    std::error_code ec;
    std::set<fs::path> visited{fs::weakly_canonical(file, ec)};
    if (ec) throw ProfileError(file.string() + ": " + ec.message());
    return build(load_chain(read_profile_file(file), file, search_dirs, visited), ref);
}

Profile load_profile_text(std::string_view text, const fs::path& origin,
                          std::span<const fs::path> search_dirs) {
    std::set<fs::path> visited{fs::weakly_canonical(fs::absolute(origin))};
    return build(load_chain(text, origin, search_dirs, visited), origin.stem().string());
}

std::map<std::string, fs::path> list_profiles(std::span<const fs::path> search_dirs) {
    std::map<std::string, fs::path> found;
    for (const auto& dir : search_dirs) {
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(dir, ec))
            if (entry.path().extension() == ".toml")
                found.emplace(entry.path().stem().string(), entry.path());
    }
    return found;
}

std::string to_toml(const Profile& resolved) {
    Profile profile = resolved;  // the key table's accessors are non-const
    // Every key is shown: the text is the whole profile, and builds on nothing (not on default).
    toml::table root{{"extends", ""}};
    for (const auto& key : key_specs()) {
        if (!key.show) continue;
        std::string_view path = key.path;
        toml::table* table = &root;
        for (auto dot = path.find('.'); dot != std::string_view::npos; dot = path.find('.')) {
            std::string section(path.substr(0, dot));
            if (!table->contains(section)) table->insert(section, toml::table{});
            table = table->get_as<toml::table>(section);
            path.remove_prefix(dot + 1);
        }
        key.show(profile, *table, std::string(path));
    }
    std::ostringstream out;
    out << root << "\n";
    return out.str();
}

std::vector<KeyDoc> profile_keys() {
    std::vector<KeyDoc> docs;
    for (const auto& key : key_specs())
        docs.push_back({key.path, key.type, key.doc, default_value_of(key)});
    return docs;
}

}  // namespace pysandbox
