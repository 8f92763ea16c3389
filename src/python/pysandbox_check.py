"""pysandbox check: finds a script's denied imports and calls with Python's own ast.

Run inside the sandbox (parsing untrusted code is untrusted work) as

    python3 pysandbox_check.py SCRIPT POLICY_JSON

where POLICY_JSON is {"profile": NAME, "deny_imports": [...], "deny_functions": {dotted name:
rule}} (policy.cpp writes it). Prints one JSON object: {"findings": [...], "omitted": N}.
"""
import ast
import json
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # for mypy alone (the annotations that name typing's types are strings)
    from typing import Any

    Finding = dict[str, Any]  # {"line", "col", "rule", "name", "message"}
    Located = ast.stmt | ast.expr  # a node with a line and a column

PROFILE = ""
DENY_IMPORTS: tuple[str, ...] = ()
DENY_FUNCTIONS: dict[str, str] = {}

IMPORTERS = {"__import__", "builtins.__import__", "importlib.import_module",
             "importlib.__import__"}
RUNNERS = {"exec", "eval", "compile", "builtins.exec", "builtins.eval", "builtins.compile"}
MAX_FINDINGS = 500
MAX_NAME = 120  # characters of a name kept in a finding: the answer must fit the output cap
MAX_NESTED_SOURCE = 3  # exec("exec('...')"): how deep constant strings are read as code


def shorten(name: str) -> str:
    return name if len(name) <= MAX_NAME else name[:MAX_NAME] + "..."


def denied_module(name: str) -> bool:
    return any(name == d or name.startswith(d + ".") for d in DENY_IMPORTS)


class Analyzer(ast.NodeVisitor):
    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}  # local name -> the dotted name it stands for
        self.star_modules: list[str] = []  # from M import *
        self.findings: list[Finding] = []
        self.imported: set[str] = set()  # top-level modules the script imports
        self.total = 0
        self.nesting = 0

    def add(self, node: "Located", rule: str, name: str, message: str) -> None:
        self.total += 1
        if len(self.findings) >= 2 * MAX_FINDINGS:
            return  # the visit is in source order but for exec strings: enough to sort
        self.findings.append({"line": node.lineno, "col": node.col_offset + 1, "rule": rule,
                              "name": name, "message": message})

    def check_import(self, node: "Located", name: "str | None") -> None:
        if name and denied_module(name):
            name = shorten(name)
            self.add(node, "denied-import", name,
                     "import of %s is denied (policy.deny_imports in profile %s)" % (name, PROFILE))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.check_import(node, alias.name)
            self.imported.add(alias.name.split(".")[0])
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.aliases[top] = top

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
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

    def constant_string(self, node: ast.expr) -> "str | None":
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        return None

    def resolve(self, node: ast.expr) -> "str | None":
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

    def namespace_of(self, node: ast.expr) -> "str | None":
        """The module whose namespace `node` is: vars(os), os.__dict__."""
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return self.resolve(node.value)
        if (isinstance(node, ast.Call) and self.resolve(node.func) == "vars" and
                len(node.args) == 1):
            return self.resolve(node.args[0])
        return None

    def denied_function(self, name: str) -> "str | None":
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

    def check_function(self, node: "Located", name: str) -> None:
        denied = self.denied_function(name)
        if denied:  # known names only: short
            rule = DENY_FUNCTIONS[denied]
            self.add(node, "denied-call", denied,
                     "%s is denied (%s in policy.deny_calls of profile %s)" % (denied, rule,
                                                                              PROFILE))

    def visit_Call(self, node: ast.Call) -> None:
        func = self.resolve(node.func)
        if func in IMPORTERS and node.args:
            self.check_import(node, self.constant_string(node.args[0]))
        elif func in RUNNERS and node.args:
            self.check_source(node, self.constant_string(node.args[0]))
        elif func:
            self.check_function(node, func)
        self.generic_visit(node)

    def check_source(self, node: ast.Call, source: "str | None") -> None:
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

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        name = self.resolve(node.value)
        for target in node.targets:
            if isinstance(target, ast.Name) and name and name != target.id:
                self.aliases[target.id] = name


def main() -> None:
    global PROFILE, DENY_IMPORTS, DENY_FUNCTIONS
    policy = json.loads(sys.argv[2])
    PROFILE = policy["profile"]
    DENY_IMPORTS = tuple(policy["deny_imports"])
    DENY_FUNCTIONS = dict(policy["deny_functions"])
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


if __name__ == "__main__":
    main()
