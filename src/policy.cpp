#include "policy.hpp"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "profile.hpp"

namespace pysandbox::policy {
namespace {

using json = nlohmann::ordered_json;

// PEP 578 events, as Python 3.11 raises them (docs.python.org/3/library/audit_events.html).
// "open" is special: the hook blocks only opens for writing outside /tmp.
constexpr CallRule kCallRules[] = {
    {"os.system", "os.system", "os.system", "run a shell command"},
    // os.spawn* is os.fork then os.exec* at run time; check reports it under this name.
    {"os.exec", "os.exec",
     "os.execv os.execve os.execl os.execle os.execlp os.execlpe os.execvp os.execvpe "
     "os.spawnl os.spawnle os.spawnlp os.spawnlpe os.spawnv os.spawnve os.spawnvp os.spawnvpe",
     "replace the interpreter with another program (os.exec*, os.spawn*)"},
    {"os.posix_spawn", "os.posix_spawn", "os.posix_spawn os.posix_spawnp",
     "start a program with os.posix_spawn*"},
    {"os.fork", "os.fork", "os.fork os.forkpty", "fork the interpreter"},
    {"os.kill", "os.kill", "os.kill os.killpg", "send a signal to a process"},
    {"subprocess.Popen", "subprocess.Popen",
     "subprocess.Popen subprocess.run subprocess.call subprocess.check_call "
     "subprocess.check_output subprocess.getoutput subprocess.getstatusoutput os.popen "
     "asyncio.create_subprocess_exec asyncio.create_subprocess_shell",
     "start a program with subprocess (os.popen too)"},
    {"socket.connect", "socket.connect", "socket.create_connection", "connect a socket"},
    {"socket.bind", "socket.bind", "socket.create_server", "bind a socket to an address"},
    {"ctypes.dlopen", "ctypes.dlopen", "ctypes.CDLL ctypes.PyDLL ctypes.cdll.LoadLibrary",
     "load a shared library with ctypes (import ctypes does this too)"},
    {"open-write-outside-tmp", "open", "",
     "open a file for writing outside /tmp (run time only: the path is known then)"},
};

json string_list(const std::vector<std::string>& items) {
    json list = json::array();
    for (const auto& item : items) list.push_back(item);
    return list;
}

const CallRule& rule_named(std::string_view name) {
    return *std::ranges::find(kCallRules, name, &CallRule::name);
}

// The policy as Python literals: JSON strings and lists are valid Python.
std::string policy_literals(const Profile& profile) {
    json events = json::object();
    json functions = json::object();
    for (const auto& name : profile.deny_calls) {
        const CallRule& rule = rule_named(name);
        events[std::string(rule.audit_event)] = name;
        std::string_view list = rule.functions;
        while (!list.empty()) {
            std::string_view word = list.substr(0, list.find(' '));
            functions[std::string(word)] = name;
            list.remove_prefix(std::min(list.size(), word.size() + 1));
        }
    }
    return "PROFILE = " + json(profile.name).dump() +
           "\nDENY_IMPORTS = " + string_list(profile.deny_imports).dump() +
           "\nDENY_CALLS = " + string_list(profile.deny_calls).dump() +
           "\nDENY_EVENTS = " + events.dump() + "\nDENY_FUNCTIONS = " + functions.dump() + "\n";
}

constexpr std::string_view kHook = R"PY(
# pysandbox's audit hook (PEP 578), installed by site before the script runs. It explains; the
# kernel layers underneath are the boundary. Each block is reported as one "kind\twhat\n" line on
# fd 4, a pipe the supervisor drains after the run; the script runs in this same process and can
# write there too, so these records are the script's word, not the sandbox's.
import sys as _sys


def _install():
    import os

    channel = 4
    try:
        os.set_inheritable(channel, False)  # programs the script starts must not hold it
        os.set_blocking(channel, False)  # a full channel drops records, never stalls the script
    except OSError:
        channel = -1
    writing_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    own_files = "/sandbox/.pysandbox/"

    def record(kind, what):
        if channel >= 0:
            try:
                os.write(channel, ("%s\t%s\n" % (kind, what)).encode("utf-8", "replace"))
            except OSError:
                pass

    def block(kind, what, key, listed):
        record(kind, what)
        # EPERM, as the kernel layer underneath would say: code that checks errno behaves alike.
        raise PermissionError(
            1, "pysandbox: the sandbox policy blocks %s (policy.%s in profile %s: %s); "
            "everything not listed there is allowed" % (what, key, PROFILE, ", ".join(listed)))

    def writes_outside_tmp(args):
        path, mode, flags = args[0], args[1], args[2]
        if path is None or isinstance(path, int):
            return False  # an fd already open
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & writing_flags)
        if not writing:
            return False
        path = os.path.abspath(os.fsdecode(path))
        return path != "/tmp" and not path.startswith("/tmp/")

    def hook(event, args):
        if event == "import" and DENY_IMPORTS:
            name = args[0]
            for denied in DENY_IMPORTS:
                if name == denied or name.startswith(denied + "."):
                    block("import", name, "deny_imports", DENY_IMPORTS)
        elif event == "open":
            if "open" in DENY_EVENTS and writes_outside_tmp(args):
                block("call", "open-write-outside-tmp", "deny_calls", DENY_CALLS)
        elif event in DENY_EVENTS:
            block("call", DENY_EVENTS[event], "deny_calls", DENY_CALLS)

    def without_own_frames(tb):
        """The traceback minus this file's frames, so it ends at the script's line."""
        kept = []
        while tb is not None:
            if not tb.tb_frame.f_code.co_filename.startswith(own_files):
                kept.append(tb)
            tb = tb.tb_next
        rebuilt = None
        for entry in reversed(kept):
            rebuilt = type(entry)(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
        return rebuilt

    def excepthook(kind, value, tb, default=_sys.excepthook):
        seen = set()
        exception = value
        while exception is not None and id(exception) not in seen:  # chained ones too
            seen.add(id(exception))
            exception.__traceback__ = without_own_frames(exception.__traceback__)
            exception = exception.__cause__ or exception.__context__
        default(kind, value, value.__traceback__ if value is not None else tb)

    _sys.addaudithook(hook)
    _sys.excepthook = excepthook
    record("hook", "installed")


if DENY_IMPORTS or DENY_CALLS:
    _install()
del _install
)PY";

constexpr std::string_view kAnalyzer = R"PY(
# pysandbox check: finds denied imports and calls with Python's own ast; prints one JSON object.
import ast
import json
import sys


IMPORTERS = {"__import__", "builtins.__import__", "importlib.import_module",
             "importlib.__import__"}
RUNNERS = {"exec", "eval", "compile", "builtins.exec", "builtins.eval", "builtins.compile"}
MAX_FINDINGS = 1000
MAX_NESTED_SOURCE = 3  # exec("exec('...')"): how deep constant strings are read as code


def denied_module(name):
    return any(name == d or name.startswith(d + ".") for d in DENY_IMPORTS)


class Analyzer(ast.NodeVisitor):
    def __init__(self):
        self.aliases = {}  # local name -> the dotted name it stands for
        self.star_modules = []  # from M import *
        self.findings = []
        self.nesting = 0

    def add(self, node, rule, name, message):
        self.findings.append({"line": node.lineno, "col": node.col_offset + 1, "rule": rule,
                              "name": name, "message": message})

    def check_import(self, node, name):
        if name and denied_module(name):
            self.add(node, "denied-import", name,
                     "import of %s is denied (policy.deny_imports in profile %s)" % (name, PROFILE))

    def visit_Import(self, node):
        for alias in node.names:
            self.check_import(node, alias.name)
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.aliases[top] = top

    def visit_ImportFrom(self, node):
        if node.level or not node.module:
            return
        self.check_import(node, node.module)
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
        if isinstance(node, ast.Subscript) and self.resolve(node.value) == "sys.modules":
            return self.constant_string(node.slice)  # sys.modules["os"]
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

    def check_function(self, node, name):
        if name in DENY_FUNCTIONS:
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
        analyzer.findings.append({"line": e.lineno or 1, "col": e.offset or 1,
                                  "rule": "syntax-error", "name": "", "message": e.msg})
    analyzer.findings.sort(key=lambda f: (f["line"], f["col"]))
    omitted = max(0, len(analyzer.findings) - MAX_FINDINGS)
    print(json.dumps({"findings": analyzer.findings[:MAX_FINDINGS], "omitted": omitted}))


main()
)PY";

}  // namespace

std::span<const CallRule> call_rules() { return kCallRules; }

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
    return "# Generated by pysandbox for this run.\n" + policy_literals(profile) +
           std::string(kHook);
}

std::string analyzer_source(const Profile& profile) {
    return policy_literals(profile) + std::string(kAnalyzer);
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
