"""`pysandbox check`: the ast analyzer finds denied imports and calls through aliases, reports
syntax errors, speaks pysandbox.check/v1 with --json, fails with 125 when it cannot analyse, runs
inside the sandbox (seen from the host: its process, the profile's limits) and logs incidents."""

import hashlib
import json
import os
import subprocess
import time

from harness import (PYSANDBOX, SandboxTestCase, command_prefix, expected_host_uid, profile, run,
                     script, temp_dir)

FINDING_KEYS = {"line", "col", "rule", "name", "message"}

# Every aliasing form the analyzer must see through, under the default profile (no denied
# imports; os.system, os.exec*, subprocess.* denied). (line, col, rule, name) it must report.
ALIASES = """\
import os as o
o.system("x")
from subprocess import Popen as P
P(["x"])
__import__('subprocess').run(["x"])
import importlib
importlib.import_module('subprocess').check_output(["x"])
from os import system
system("x")
import os
getattr(os, 'system')("x")
x = os.system; x("y")
if True:
    os.execv("/bin/true", ["true"])
import sys
sys.modules['os'].system("x")
exec("import subprocess as s; s.call(['x'])")
"""
ALIAS_FINDINGS = {
    "import os as o; o.system()": (2, 1, "denied-call", "os.system"),
    "from subprocess import Popen as P; P()": (4, 1, "denied-call", "subprocess.Popen"),
    "__import__('subprocess').run()": (5, 1, "denied-call", "subprocess.run"),
    "importlib.import_module('subprocess').check_output()":
        (7, 1, "denied-call", "subprocess.check_output"),
    "from os import system; system()": (9, 1, "denied-call", "os.system"),
    "getattr(os, 'system')()": (11, 1, "denied-call", "os.system"),
    "x = os.system; x()": (12, 16, "denied-call", "os.system"),
    "os.execv() indented": (14, 5, "denied-call", "os.execv"),
    "sys.modules['os'].system()": (16, 1, "denied-call", "os.system"),
    "exec('...s.call()'), found at the exec": (17, 1, "denied-call", "subprocess.call"),
}
# Lines that only import something allowed: nothing may be reported there.
ALIAS_INNOCENT_LINES = {1, 6, 10, 15}

IMPORTS = """\
import socket
from socket import AF_INET
import socket.foo
import socketserver
__import__('subprocess')
import importlib as il
il.import_module('subprocess')
import json, subprocess
from socketserver import TCPServer
import ctypes
"""
IMPORT_FINDINGS = {
    "import socket": (1, 1, "denied-import", "socket"),
    "from socket import x": (2, 1, "denied-import", "socket"),
    "import socket.foo (submodule)": (3, 1, "denied-import", "socket.foo"),
    "__import__('subprocess')": (5, 1, "denied-import", "subprocess"),
    "il.import_module('subprocess')": (7, 1, "denied-import", "subprocess"),
    "import json, subprocess": (8, 1, "denied-import", "subprocess"),
}
# socketserver is not a submodule of socket; ctypes is not denied by this profile.
IMPORT_INNOCENT_LINES = {4, 6, 9, 10}

DENY_IMPORTS_PROFILE = """\
extends = "default"

[policy]
deny_imports = ["socket", "subprocess"]
"""


def key(finding):
    return (finding["line"], finding["col"], finding["rule"], finding["name"])


class CheckTestCase(SandboxTestCase):
    def check(self, *args, **kwargs):
        return run(["check", *map(str, args)], **kwargs)

    def check_json(self, *args, expect_exit=None, **kwargs):
        r = self.check("--json", *args, **kwargs)
        if expect_exit is not None:
            self.assertExit(r, expect_exit)
        try:
            return r, json.loads(r.stdout)
        except ValueError:
            self.fail("check --json printed no JSON" + r.describe())


class FindingsTest(CheckTestCase):
    def test_clean_script_exits_0_silently(self):
        path = script("import json, math\nprint(json.dumps(math.pi))\n")
        r = self.check(path)
        self.assertExit(r, 0)
        self.assertEqual((r.stdout, r.stderr), (b"", b""), r.describe())
        r, out = self.check_json(path, expect_exit=0)
        self.assertEqual(out, {"schema": "pysandbox.check/v1", "status": "clean",
                               "findings": [], "omitted": 0})

    def test_sees_through_every_alias_form(self):
        path = script(ALIASES)
        r, out = self.check_json(path, expect_exit=1)
        self.assertEqual(out["status"], "findings")
        found = {key(f) for f in out["findings"]}
        for form, expected in ALIAS_FINDINGS.items():
            with self.subTest(form):
                self.assertIn(expected, found, json.dumps(out["findings"], indent=1))
        flagged = sorted(f["line"] for f in out["findings"] if f["line"] in ALIAS_INNOCENT_LINES)
        self.assertEqual(flagged, [], "plain imports of allowed modules were reported")

    def test_human_output_is_one_line_per_finding(self):
        path = script("import os\n\nos.system('ls')\nos.fork()\n")
        r = self.check(path)
        self.assertExit(r, 1)
        lines = r.stdout.decode().splitlines()
        self.assertEqual(len(lines), 2, r.describe())
        self.assertRegex(lines[0], rf"^{path}:3:1: denied-call: .*os\.system.*policy\.deny_calls"
                                   r".*profile default")
        self.assertRegex(lines[1], rf"^{path}:4:1: denied-call: .*os\.fork")

    def test_denied_imports_and_submodules(self):
        prof = profile(DENY_IMPORTS_PROFILE)
        path = script(IMPORTS)
        r, out = self.check_json("-p", prof, path, expect_exit=1)
        found = {key(f) for f in out["findings"]}
        for form, expected in IMPORT_FINDINGS.items():
            with self.subTest(form):
                self.assertIn(expected, found, json.dumps(out["findings"], indent=1))
        flagged = sorted(f["line"] for f in out["findings"] if f["line"] in IMPORT_INNOCENT_LINES)
        self.assertEqual(flagged, [], "imports the profile allows were reported")
        message = next(f["message"] for f in out["findings"] if f["line"] == 1)
        self.assertIn("policy.deny_imports", message)

    def test_the_profile_decides(self):
        # strict denies the ctypes import, default does not: the policy travels to the analyzer.
        path = script("import ctypes\nprint(ctypes.sizeof(ctypes.c_int))\n")
        self.check_json(path, expect_exit=0)
        r, out = self.check_json("-p", "strict", path, expect_exit=1)
        self.assertEqual([key(f) for f in out["findings"]], [(1, 1, "denied-import", "ctypes")])
        self.assertIn("strict", out["findings"][0]["message"])

    def test_syntax_error_is_a_finding(self):
        path = script("x = 1\ndef f(:\n    pass\n")
        r = self.check(path)
        self.assertExit(r, 1)
        self.assertRegex(r.stdout.decode(), rf"^{path}:2:\d+: syntax-error: ")
        r, out = self.check_json(path, expect_exit=1)
        self.assertEqual(out["status"], "findings")
        self.assertEqual(len(out["findings"]), 1, out)
        self.assertEqual((out["findings"][0]["line"], out["findings"][0]["rule"]),
                         (2, "syntax-error"))

    def test_json_schema_and_fields(self):
        path = script("import subprocess\nsubprocess.run(['ls'])\n")
        r, out = self.check_json(path, expect_exit=1)
        self.assertEqual(set(out), {"schema", "status", "findings", "omitted"})
        self.assertEqual((out["schema"], out["status"], out["omitted"]),
                         ("pysandbox.check/v1", "findings", 0))
        self.assertEqual(r.stdout.count(b"\n"), 1, "not one line")
        self.assertEqual(len(out["findings"]), 1, out)
        f = out["findings"][0]
        self.assertEqual(set(f), FINDING_KEYS)
        self.assertEqual(key(f), (2, 1, "denied-call", "subprocess.run"))
        self.assertIsInstance(f["message"], str)
        self.assertIn("subprocess.Popen", f["message"])  # the rule it falls under
        self.assertIn("policy.deny_calls", f["message"])

    def test_findings_are_capped_and_the_rest_counted(self):
        path = script("import os\n" + "os.system('x')\n" * 1200)
        r, out = self.check_json(path, expect_exit=1, timeout=60)
        self.assertEqual((len(out["findings"]), out["omitted"]), (500, 700))
        self.assertEqual([f["line"] for f in out["findings"]], list(range(2, 502)))
        r = self.check(path, timeout=60)
        self.assertExit(r, 1)
        lines = r.stdout.decode().splitlines()
        self.assertEqual(len(lines), 501, r.describe())
        self.assertIn("700", lines[-1])

    def test_long_names_cannot_push_findings_past_the_output_cap(self):
        # strict keeps 1 MiB of output; 30 denied imports with 20 kB names make the analyzer's
        # answer larger than that (each name is in the finding twice), though 30 < 1000.
        path = script("".join(f"import socket.{'a' * 20000}{i}\n" for i in range(30)))
        r, out = self.check_json("-p", "strict", path, timeout=60)
        self.assertEqual(out["status"], "findings", out.get("error"))
        self.assertEqual(len(out["findings"]) + out["omitted"], 30)
        self.assertExit(r, 1)

    def test_does_not_run_the_script(self):
        # Run, this would sleep past the default profile's 5 s wall-clock limit (exit 125).
        path = script("import time\ntime.sleep(30)\n")
        r = self.check(path, timeout=20)
        self.assertExit(r, 0)
        self.assertLess(r.elapsed, 4, r.describe())

    def test_star_import_is_seen(self):
        # `from os import *` binds system like `from os import system` does.
        path = script("from os import *\nsystem('x')\n")
        r, out = self.check_json(path)
        self.assertIn((2, 1, "denied-call", "os.system"), {key(f) for f in out["findings"]},
                      r.describe())
        self.assertExit(r, 1)

    def test_re_exported_modules_are_seen(self):
        # os.path imports os: os.path.os.system is os.system. Only names rooted in an imported
        # module are read this way; an unknown object's .os.system is not guessed at.
        path = script("import os\nfrom os import path\nos.path.os.system('a')\n"
                      "path.os.system('b')\nx = something.os.system\n")
        r, out = self.check_json(path)
        self.assertEqual({key(f) for f in out["findings"]},
                         {(3, 1, "denied-call", "os.system"), (4, 1, "denied-call", "os.system")},
                         r.describe())


class CheckErrorsTest(CheckTestCase):
    def test_missing_script_is_125(self):
        missing = temp_dir() / "missing.py"
        r = self.check(missing)
        self.assertExit(r, 125)
        self.assertEqual(r.stdout, b"", r.describe())
        self.assertIn(b"missing.py", r.stderr)
        r, out = self.check_json(missing, expect_exit=125)
        self.assertEqual((out["schema"], out["status"], out["findings"]),
                         ("pysandbox.check/v1", "error", []))
        self.assertIn("missing.py", out["error"])

    def test_bad_profile_is_125(self):
        prof = profile('extends = "default"\n\n[policy]\ndeny_calls = ["os.sytem"]\n')
        r = self.check("-p", prof, script("print(1)\n"))
        self.assertExit(r, 125)
        self.assertIn(f"{prof}:4:".encode(), r.stderr)
        self.assertIn(b"policy.deny_calls", r.stderr)
        r, out = self.check_json("-p", prof, script("print(1)\n"), expect_exit=125)
        self.assertEqual((out["status"], out["findings"]), ("error", []))
        self.assertIn("policy.deny_calls", out["error"])


class InsideTheSandboxTest(CheckTestCase):
    """The analyzer parses untrusted source: it must run in a sandbox, under the profile."""

    def big_script(self, elements: int, name: str):
        return script("x = [" + "1," * elements + "]\n", name=name)

    def test_analyzer_process_is_sandboxed(self):
        # Parsing a 150k-element list takes a couple of seconds here: long enough to find the
        # analyzer in the host's /proc by the script's (unique) file name and look at it.
        prof = profile('extends = "default"\n\n[limits]\nmemory = "1GiB"\nwall_time = "30s"\n'
                       'cpu_time = "30s"\n')
        path = self.big_script(150_000, f"{self.marker}.py")
        proc = subprocess.Popen(command_prefix() + [PYSANDBOX, "check", "-p", str(prof), str(path)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        seen = None
        deadline = time.monotonic() + 25
        token = self.marker.encode()
        while seen is None and proc.poll() is None and time.monotonic() < deadline:
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    with open(f"/proc/{name}/cmdline", "rb") as f:
                        argv = f.read().split(b"\0")
                    exe = os.readlink(f"/proc/{name}/exe")
                    with open(f"/proc/{name}/status") as f:
                        status = dict(line.split(":", 1) for line in f)
                    ns = {k: os.readlink(f"/proc/{name}/ns/{k}") for k in ("net", "mnt", "pid")}
                except OSError:
                    continue
                if os.path.basename(exe).startswith("python") and any(token in a for a in argv):
                    seen = (argv, status, ns)
                    break
            time.sleep(0.005)
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 0, (out, err))
        self.assertIsNotNone(seen, "no analyzer process was seen while check ran")
        argv, status, ns = seen
        self.assertGreater(len(status["NSpid"].split()), 1, "the analyzer is in the host's PID ns")
        self.assertEqual(int(status["Uid"].split()[0]), expected_host_uid())
        for kind in ("net", "mnt", "pid"):
            self.assertNotEqual(ns[kind], os.readlink(f"/proc/self/ns/{kind}"),
                                f"the analyzer shares the host's {kind} namespace")
        # It reads the script as the sandbox sees it, not the host path.
        self.assertIn(f"/sandbox/{self.marker}.py".encode(), argv)

    def test_bounded_by_the_profiles_wall_time(self):
        # Analysing 300k elements took 2 s on a slow day and 0.99 s on a fast one, which ran
        # within a 1 s limit: the limit is now a third of the fast time.
        prof = profile('extends = "default"\n\n[limits]\nmemory = "1GiB"\nwall_time = "300ms"\n'
                       'cpu_time = "1s"\n')
        r, out = self.check_json("-p", prof, self.big_script(300_000, "big.py"),
                                 expect_exit=125, timeout=30)
        self.assertLess(r.elapsed, 6, r.describe())
        self.assertEqual(out["status"], "error")
        self.assertIn("limit", out["error"])

    def test_bounded_by_the_profiles_memory(self):
        prof = profile('extends = "default"\n\n[limits]\nmemory = "48MiB"\n')
        r, out = self.check_json("-p", prof, self.big_script(300_000, "big.py"),
                                 expect_exit=125, timeout=30)
        self.assertEqual(out["status"], "error")
        self.assertIn("MemoryError", out["error"])


class CheckIncidentLogTest(CheckTestCase):
    def test_findings_are_logged_once(self):
        log = temp_dir(0o777) / "incidents.jsonl"
        path = script("import os as o\n\no.system('x')\n", name="bad.py")
        r = self.check("--incident-log", log, path)
        self.assertExit(r, 1)
        lines = log.read_text().splitlines()
        self.assertEqual(len(lines), 1, lines)
        entry = json.loads(lines[0])
        self.assertEqual(entry["schema"], "pysandbox.incident/v1")
        self.assertEqual(entry["command"], "check")
        self.assertEqual(entry["profile"], "default")
        self.assertNotIn("exit_code", entry)  # a run's field
        self.assertRegex(entry["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
        self.assertEqual(entry["script_sha256"], hashlib.sha256(path.read_bytes()).hexdigest())
        self.assertIn("bad.py", entry["script"])
        self.assertEqual(entry["blocked"],
                         [{"kind": "call", "what": "os.system", "line": 3, "col": 1}])

    def test_nothing_logged_without_denied_findings(self):
        log = temp_dir(0o777) / "incidents.jsonl"
        self.assertExit(self.check("--incident-log", log, script("print(1)\n")), 0)
        self.assertExit(self.check("--incident-log", log, script("def f(:\n")), 1)  # syntax only
        self.assertEqual(log.read_text() if log.exists() else "", "")

    def test_missing_script_creates_no_log(self):
        log = temp_dir(0o777) / "incidents.jsonl"
        r = self.check("--incident-log", log, temp_dir() / "missing.py")
        self.assertExit(r, 125)
        self.assertFalse(log.exists())

    def test_symlinked_log_is_refused(self):
        d = temp_dir(0o777)
        target = d / "target"
        target.write_text("original\n")
        os.chmod(target, 0o666)
        (d / "link").symlink_to(target)
        r = self.check("--incident-log", d / "link", script("import os\nos.system('x')\n"))
        self.assertExit(r, 125)
        self.assertEqual(target.read_text(), "original\n")


if __name__ == "__main__":
    import unittest
    unittest.main()
