#include "plan/policy.hpp"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "sys/bounded_counts.hpp"

namespace pysandbox::policy {
namespace {

using json = nlohmann::ordered_json;

// One name of `policy.deny_calls`, and what it stands for.
struct CallRule {
    std::string_view name;          // as written in a profile: "os.system"
    std::string_view audit_events;  // space-separated PEP 578 events the hook refuses ("open":
                                    // only for writing outside /tmp)
    std::string_view functions;     // space-separated dotted names `check` reports calls of
};

// PEP 578 events, as Python 3.11 raises them (docs.python.org/3/library/audit_events.html).
constexpr CallRule kCallRules[] = {
    {"os.system", "os.system", "os.system"},
    // os.spawn* is os.fork then os.exec* at run time; check reports it under this name.
    {"os.exec", "os.exec",
     "os.execv os.execve os.execl os.execle os.execlp os.execlpe os.execvp os.execvpe "
     "os.spawnl os.spawnle os.spawnlp os.spawnlpe os.spawnv os.spawnve os.spawnvp os.spawnvpe"},
    {"os.posix_spawn", "os.posix_spawn", "os.posix_spawn os.posix_spawnp"},
    {"os.fork", "os.fork os.forkpty", "os.fork os.forkpty pty.fork pty.spawn"},
    {"os.kill", "os.kill os.killpg", "os.kill os.killpg"},
    {"subprocess.Popen", "subprocess.Popen",
     "subprocess.Popen subprocess.run subprocess.call subprocess.check_call "
     "subprocess.check_output subprocess.getoutput subprocess.getstatusoutput os.popen "
     "asyncio.create_subprocess_exec asyncio.create_subprocess_shell"},
    {"socket.connect", "socket.connect socket.sendto socket.sendmsg", "socket.create_connection"},
    {"socket.bind", "socket.bind", "socket.create_server"},
    {"ctypes.dlopen", "ctypes.dlopen", "ctypes.CDLL ctypes.PyDLL ctypes.cdll.LoadLibrary"},
    {"open-write-outside-tmp", "open", ""},  // run time only: check cannot know the path
};

// Calls `visit` with each word of a space-separated list.
template <typename Visit>
void for_each_word(std::string_view list, Visit visit) {
    while (!list.empty()) {
        std::string_view word = list.substr(0, list.find(' '));
        visit(std::string(word));
        list.remove_prefix(std::min(list.size(), word.size() + 1));
    }
}

json string_list(const std::vector<std::string>& items) {
    json list = json::array();
    for (const auto& item : items) list.push_back(item);
    return list;
}

const CallRule& rule_named(std::string_view name) {
    return *std::ranges::find(kCallRules, name, &CallRule::name);
}

// JSON strings, lists and objects are Python literals too. The profile's name may hold any
// bytes; what is not UTF-8 is replaced.
std::string literal(const json& value) {
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The policy as data: the profile's name, the denied imports and calls, and which audit event
// stands for which call.
json install_arguments(const Rules& rules, std::string_view profile_name) {
    json events = json::object();
    for (const auto& name : rules.deny_calls)
        for_each_word(rule_named(name).audit_events,
                      [&](std::string event) { events[event] = name; });
    return json::array(
        {profile_name, string_list(rules.deny_imports), string_list(rules.deny_calls), events});
}

}  // namespace

bool is_known_call(std::string_view name) {
    return std::ranges::find(kCallRules, name, &CallRule::name) != std::end(kCallRules);
}

std::string known_calls() {
    std::string names;
    for (const auto& rule : kCallRules)
        names += (names.empty() ? "" : ", ") + std::string(rule.name);
    return names;
}

bool is_module_name(std::string_view name) {
    auto identifier = [](std::string_view part) {
        return !part.empty() && !std::isdigit(static_cast<unsigned char>(part[0])) &&
               std::ranges::all_of(part, [](char c) {
                   return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
               });
    };
    for (;;) {
        auto dot = name.find('.');
        if (!identifier(name.substr(0, dot))) return false;
        if (dot == std::string_view::npos) return true;
        name.remove_prefix(dot + 1);
    }
}

void Rules::drop_socket_rules() {
    auto is_socket = [](std::string_view name) {
        return name == "socket" || name.starts_with("socket.");
    };
    std::erase_if(deny_calls, is_socket);
    std::erase_if(deny_imports, is_socket);
}

std::string hook_arguments(const Rules& rules, std::string_view profile_name,
                           const HookSetup& setup) {
    if (!rules.wants_hook()) return {};
    json arguments = install_arguments(rules, profile_name);
    if (setup.channel_path.empty())
        arguments.push_back(setup.channel_fd);
    else
        arguments.push_back(setup.channel_path);
    arguments.push_back(setup.own_dir);
    arguments.push_back(setup.for_jobs ? 1 : 0);  // JSON's true is not a Python literal
    return literal(arguments);
}

std::string analyzer_argument(const Rules& rules, std::string_view profile_name) {
    json functions = json::object();
    for (const auto& name : rules.deny_calls)
        for_each_word(rule_named(name).functions,
                      [&](std::string word) { functions[word] = name; });
    return literal({{"profile", profile_name},
                    {"deny_imports", string_list(rules.deny_imports)},
                    {"deny_functions", functions}});
}

void Records::add(std::string_view record) {
    constexpr std::size_t kMaxWhat = 200;
    auto tab = record.find('\t');
    if (tab == std::string_view::npos) return;
    std::string_view kind = record.substr(0, tab), what = record.substr(tab + 1);
    if (kind == "hook" && what == "installed") {
        hook_installed = true;
        return;
    }
    if ((kind != "import" && kind != "call") || what.empty() || what.size() > kMaxWhat ||
        !std::ranges::all_of(what,
                             [](char c) { return std::isgraph(static_cast<unsigned char>(c)); }))
        return;
    count_bounded(blocks, {std::string(kind), std::string(what)},
                  {std::string(kind), std::string("(others)")});
}

Records parse_records(std::string_view text) {
    Records records;
    for (auto end = text.find('\n'); end != std::string_view::npos; end = text.find('\n')) {
        records.add(text.substr(0, end));
        text.remove_prefix(end + 1);
    }
    return records;  // what is left has no newline: a torn last record
}

}  // namespace pysandbox::policy
