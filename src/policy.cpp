#include "policy.hpp"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "profile.hpp"
#include "python_modules.hpp"

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
json policy_data(const Profile& profile) {
    json events = json::object();
    for (const auto& name : profile.deny_calls)
        for_each_word(rule_named(name).audit_events, [&](std::string event) { events[event] = name; });
    return json::array({profile.name, string_list(profile.deny_imports),
                        string_list(profile.deny_calls), events});
}

// The analyzer's view: as above, plus the functions whose calls `check` reports.
std::string analyzer_literals(const Profile& profile) {
    json functions = json::object();
    for (const auto& name : profile.deny_calls)
        for_each_word(rule_named(name).functions, [&](std::string word) { functions[word] = name; });
    return "PROFILE = " + literal(profile.name) +
           "\nDENY_IMPORTS = " + literal(string_list(profile.deny_imports)) +
           "\nDENY_FUNCTIONS = " + literal(functions) + "\n";
}


constexpr std::string_view kAnalyzer = R"PY(
# pysandbox check: finds denied imports and calls with Python's own ast; prints one JSON object.
import ast
import json
import sys


IMPORTERS = {"__import__", "builtins.__import__", "importlib.import_module",
             "importlib.__import__"}
RUNNERS = {"exec", "eval", "compile", "builtins.exec", "builtins.eval", "builtins.compile"}
MAX_FINDINGS = 500
MAX_NAME = 120  # characters of a name kept in a finding: the answer must fit the output cap
MAX_NESTED_SOURCE = 3  # exec("exec('...')"): how deep constant strings are read as code


def shorten(name):
    return name if len(name) <= MAX_NAME else name[:MAX_NAME] + "..."


def denied_module(name):
    return any(name == d or name.startswith(d + ".") for d in DENY_IMPORTS)


class Analyzer(ast.NodeVisitor):
    def __init__(self):
        self.aliases = {}  # local name -> the dotted name it stands for
        self.star_modules = []  # from M import *
        self.findings = []
        self.imported = set()  # top-level modules the script imports
        self.total = 0
        self.nesting = 0

    def add(self, node, rule, name, message):
        self.total += 1
        if len(self.findings) >= 2 * MAX_FINDINGS:
            return  # the visit is in source order but for exec strings: enough to sort
        self.findings.append({"line": node.lineno, "col": node.col_offset + 1, "rule": rule,
                              "name": name, "message": message})

    def check_import(self, node, name):
        if name and denied_module(name):
            name = shorten(name)
            self.add(node, "denied-import", name,
                     "import of %s is denied (policy.deny_imports in profile %s)" % (name, PROFILE))

    def visit_Import(self, node):
        for alias in node.names:
            self.check_import(node, alias.name)
            self.imported.add(alias.name.split(".")[0])
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.aliases[top] = top

    def visit_ImportFrom(self, node):
        if node.level or not node.module:
            return
        self.check_import(node, node.module)
        self.imported.add(node.module.split(".")[0])
        for alias in node.names:
            if alias.name == "*":
                self.star_modules.append(node.module)
                continue
            full = node.module + "." + alias.name
            if not denied_module(node.module):
                self.check_import(node, full)  # from xml import etree: a submodule
            self.aliases[alias.asname or alias.name] = full
            self.check_function(node, full)

    def constant_string(self, node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        return None

    def resolve(self, node):
        """The dotted name an expression stands for, seeing through aliases, or None."""
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            for module in self.star_modules:
                if module + "." + node.id in DENY_FUNCTIONS:
                    return module + "." + node.id
            return node.id
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return base + "." + node.attr if base else None
        if isinstance(node, ast.Subscript):
            key = self.constant_string(node.slice)
            if self.resolve(node.value) == "sys.modules":
                return key  # sys.modules["os"]
            namespace = self.namespace_of(node.value)
            return namespace + "." + key if namespace and key else None
        if isinstance(node, ast.Call) and node.args:
            func = self.resolve(node.func)
            first = self.constant_string(node.args[0])
            if func in IMPORTERS and first:
                return first
            if func == "getattr" and len(node.args) >= 2:
                base = self.resolve(node.args[0])
                attr = self.constant_string(node.args[1])
                return base + "." + attr if base and attr else None
        return None

    def namespace_of(self, node):
        """The module whose namespace `node` is: vars(os), os.__dict__."""
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return self.resolve(node.value)
        if (isinstance(node, ast.Call) and self.resolve(node.func) == "vars" and
                len(node.args) == 1):
            return self.resolve(node.args[0])
        return None

    def denied_function(self, name):
        """The denied function `name` reaches: itself, or for a name rooted in an imported
        module, a denied module.function at its end (os.path.os.system is os.system)."""
        if name in DENY_FUNCTIONS:
            return name
        parts = name.split(".")
        if len(parts) > 2 and parts[0] in self.imported:
            for start in range(1, len(parts) - 1):
                tail = ".".join(parts[start:])
                if tail in DENY_FUNCTIONS:
                    return tail
        return None

    def check_function(self, node, name):
        name = self.denied_function(name)
        if name:  # known names only: short
            rule = DENY_FUNCTIONS[name]
            self.add(node, "denied-call", name,
                     "%s is denied (%s in policy.deny_calls of profile %s)" % (name, rule, PROFILE))

    def visit_Call(self, node):
        func = self.resolve(node.func)
        if func in IMPORTERS and node.args:
            self.check_import(node, self.constant_string(node.args[0]))
        elif func in RUNNERS and node.args:
            self.check_source(node, self.constant_string(node.args[0]))
        elif func:
            self.check_function(node, func)
        self.generic_visit(node)

    def check_source(self, node, source):
        """Code in a constant string, as exec and eval will run it: found at the call's line."""
        if source is None or self.nesting >= MAX_NESTED_SOURCE:
            return
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return
        for inner in ast.walk(tree):
            if hasattr(inner, "lineno"):
                inner.lineno, inner.col_offset = node.lineno, node.col_offset
        self.nesting += 1
        self.visit(tree)
        self.nesting -= 1

    def visit_Assign(self, node):
        self.generic_visit(node)
        name = self.resolve(node.value)
        for target in node.targets:
            if isinstance(target, ast.Name) and name and name != target.id:
                self.aliases[target.id] = name


def main():
    with open(sys.argv[1], "rb") as script:
        source = script.read()
    analyzer = Analyzer()
    try:
        analyzer.visit(ast.parse(source, sys.argv[1]))
    except SyntaxError as e:
        analyzer.total += 1
        analyzer.findings.append({"line": e.lineno or 1, "col": e.offset or 1,
                                  "rule": "syntax-error", "name": "", "message": e.msg})
    analyzer.findings.sort(key=lambda f: (f["line"], f["col"]))
    omitted = max(0, analyzer.total - MAX_FINDINGS)
    print(json.dumps({"findings": analyzer.findings[:MAX_FINDINGS], "omitted": omitted}))


main()
)PY";

}  // namespace

bool is_known_call(std::string_view name) {
    return std::ranges::find(kCallRules, name, &CallRule::name) != std::end(kCallRules);
}

std::string known_calls() {
    std::string names;
    for (const auto& rule : kCallRules) names += (names.empty() ? "" : ", ") + std::string(rule.name);
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

bool wants_hook(const Profile& profile) {
    return !profile.deny_imports.empty() || !profile.deny_calls.empty();
}

std::string sitecustomize_source(const Profile& profile) {
    if (!wants_hook(profile)) return "# Generated by pysandbox: this profile has no [policy].\n";
    return "# Generated by pysandbox for this run: the [policy] audit hook.\n"
           "from pysandbox_hook import install\n"
           "install(*" + literal(policy_data(profile)) + ")\n"
           "del install\n";
}

std::string_view hook_module_source() { return kHookModuleSource; }

std::string analyzer_source(const Profile& profile) {
    return analyzer_literals(profile) + std::string(kAnalyzer);
}

Records parse_records(std::string_view text) {
    constexpr std::size_t kMaxWhat = 200;
    constexpr std::size_t kMaxDistinct = 100;  // the script can write here too: stay small
    Records records;
    while (!text.empty()) {
        auto end = text.find('\n');
        if (end == std::string_view::npos) break;  // a torn last line
        std::string_view line = text.substr(0, end);
        text.remove_prefix(end + 1);
        auto tab = line.find('\t');
        if (tab == std::string_view::npos) continue;
        std::string_view kind = line.substr(0, tab), what = line.substr(tab + 1);
        if (kind == "hook" && what == "installed") {
            records.hook_installed = true;
            continue;
        }
        if ((kind != "import" && kind != "call") || what.empty() || what.size() > kMaxWhat ||
            !std::ranges::all_of(what, [](char c) { return std::isgraph(static_cast<unsigned char>(c)); }))
            continue;
        std::pair<std::string, std::string> key{kind, what};
        if (records.blocks.size() >= kMaxDistinct && !records.blocks.contains(key)) continue;
        ++records.blocks[std::move(key)];
    }
    return records;
}

}  // namespace pysandbox::policy
