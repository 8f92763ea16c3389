"""The run-time audit hook ([policy]): denied calls and imports raise PermissionError(EPERM) with
the sandbox's message, the traceback ends at the script's line, --json reports the blocks in
`violations` and `status`; real work still runs; the hook's channel cannot be abused; -I/-E/-S
are refused; the incident log gets one whole line per blocked run."""

import errno
import hashlib
import json
import os
import subprocess
import unittest
from concurrent.futures import ThreadPoolExecutor

from harness import (PYSANDBOX, SandboxTestCase, command_prefix, parse_report, profile, run,
                     script, temp_dir)

BLOCK_MESSAGE = ("pysandbox: the sandbox policy blocks {what} (policy.deny_calls in profile "
                 "{profile}: ")
ALLOWED_TAIL = "everything not listed there is allowed"

# What the default profile denies, each with a call that triggers it.
DEFAULT_DENIED = {
    "os.system": "os.system('true')",
    "subprocess.Popen": "subprocess.run(['/bin/true'])",
    "os.exec": "os.execv('/bin/true', ['true'])",
    "os.posix_spawn": "os.posix_spawn('/bin/true', ['true'], {})",
    "os.fork": "os.fork()",
    "socket.connect": "socket.socket(socket.AF_UNIX).connect('/tmp/nothing-here')",
}

EMPTY_POLICY = """\
extends = "default"

[policy]
deny_imports = []
deny_calls = []
"""


def result_json(r):
    return r.json()


def call_blocks(out):
    """The hook's blocks in a JSON result: kind call/import only."""
    return [v for v in out["violations"] if v["kind"] in ("call", "import")]


class DeniedCallsTest(SandboxTestCase):
    def test_each_default_denied_call_is_blocked_by_the_hook(self):
        for what, call in DEFAULT_DENIED.items():
            with self.subTest(what):
                r = self.run_script(f"""
                    import os, socket, subprocess, sys
                    try:
                        {call}
                    except PermissionError as e:
                        report({{"errno": e.errno, "message": e.strerror}})
                    """, options=["--json"])
                out = result_json(r)
                self.assertEqual(out["status"], "ok", r.describe())
                inner = out["stdout"].encode()
                self.assertIn(b"REPORT ", inner, r.describe())
                got = parse_report(inner)
                self.assertEqual(got["errno"], 1)
                self.assertTrue(got["message"].startswith(
                    BLOCK_MESSAGE.format(what=what, profile="default")), got["message"])
                self.assertTrue(got["message"].endswith(ALLOWED_TAIL), got["message"])
                # Blocked by the hook, before the kernel saw anything: no syscall denial.
                self.assertEqual(out["violations"], [
                    {"kind": "call", "what": what, "count": 1, "action": "denied"}])
                self.assertEqual(out["enforcement"]["audit_hook"], "installed")

    def test_hook_stops_programs_the_kernel_would_allow(self):
        # datascience lets processes through the kernel layers; the hook alone refuses these.
        # With an empty [policy] the same script does create the markers (the control).
        wd = temp_dir(0o777)
        body = """
            import os, subprocess, sys
            done = []
            for name, fn in (
                    ("system", lambda: os.system("echo > /tmp/work/system")),
                    ("popen", lambda: subprocess.run(["/bin/sh", "-c", "echo > /tmp/work/popen"])),
                    ("spawn", lambda: os.waitpid(os.posix_spawn(
                        "/bin/sh", ["sh", "-c", "echo > /tmp/work/spawn"], {}), 0))):
                try:
                    fn()
                except PermissionError:
                    pass
            """
        r = self.run_script(body, options=["-p", "datascience", "--workdir", wd, "--json"])
        out = result_json(r)
        self.assertEqual(out["status"], "ok", r.describe())
        self.assertEqual(sorted(os.listdir(wd)), [])
        self.assertEqual(sorted(v["what"] for v in call_blocks(out)),
                         ["os.posix_spawn", "os.system", "subprocess.Popen"])
        open_prof = profile('extends = "datascience"\n\n[policy]\ndeny_calls = []\n')
        r = self.run_script(body, options=["-p", open_prof, "--workdir", wd])
        self.assertExit(r, 0)
        self.assertEqual(sorted(os.listdir(wd)), ["popen", "spawn", "system"],
                         "control: without the policy the programs run")

    def test_script_cannot_switch_the_hook_off(self):
        # The script can import the modules the hook comes from; whatever it finds there, clearing
        # or emptying it must not turn the hook off. Under datascience the kernel would let the
        # shell run, so the host's workdir shows whether the hook still refused it.
        wd = temp_dir(0o777)
        r = self.run_script("""
            import os, sys
            import sitecustomize
            for module in (sitecustomize,):
                for attr, value in list(vars(module).items()):
                    if attr.startswith("__"):
                        continue  # __builtins__ is everyone's: clearing it ends the script
                    try:
                        value.clear()
                    except Exception:
                        pass
                    setattr(module, attr, None)
            os.write = lambda fd, data: len(data)  # the hook's records go through os.write
            try:
                os.system("echo > /tmp/work/ran")
            except PermissionError:
                pass
            """, options=["-p", "datascience", "--workdir", wd, "--json"])
        out = result_json(r)
        self.assertEqual(os.listdir(wd), [], "the script turned the hook off and ran a shell"
                         + r.describe())
        self.assertEqual(call_blocks(out), [
            {"kind": "call", "what": "os.system", "count": 1, "action": "denied"}])

    def test_every_function_of_a_rule_is_blocked(self):
        # strict denies os.kill and os.fork; os.killpg and os.forkpty fall under them (check
        # reports them so), and raise their own audit events.
        r = self.run_script("""
            import os
            outcome = {}
            for name, fn in (("os.killpg", lambda: os.killpg(os.getpgrp(), 0)),
                             ("os.kill", lambda: os.kill(os.getpid(), 0))):
                try:
                    fn()
                    outcome[name] = "went through"
                except OSError as e:
                    outcome[name] = e.errno
            report(outcome)
            """, options=["-p", "strict", "--json"])
        out = result_json(r)
        self.assertEqual(parse_report(out["stdout"].encode()), {"os.killpg": 1, "os.kill": 1},
                         r.describe())
        self.assertEqual(call_blocks(out), [
            {"kind": "call", "what": "os.kill", "count": 2, "action": "denied"}])

    def test_uncaught_block_traceback_ends_at_the_script(self):
        r = self.run_script("""
            import os

            def helper():
                os.system("true")

            helper()
            """)
        self.assertExit(r, 1)
        err = r.stderr.decode()
        self.assertNotIn(".pysandbox", err)
        self.assertNotIn("sitecustomize", err)
        lines = err.splitlines()
        tb_end = next(i for i, line in enumerate(lines) if line.startswith("PermissionError:"))
        # The innermost frame is the script's os.system line (8: REPORT_HELPER's 3 lines, a
        # blank line, then the body).
        # The script's frames name the caller's path for it (absolute here), not /sandbox/NAME.
        self.assertRegex(lines[tb_end - 2],
                         r'^  File "(?!/sandbox/)/[^"]*/probe\.py", line 8, in helper$')
        self.assertEqual(lines[tb_end - 1].strip(), 'os.system("true")')
        self.assertIn("[Errno 1] " + BLOCK_MESSAGE.format(what="os.system", profile="default"),
                      lines[tb_end])
        self.assertIn("pysandbox: the sandbox policy blocked 1 call: os.system", err)

    def test_chained_exception_has_no_hook_frames_either(self):
        r = self.run_script("""
            import subprocess
            try:
                subprocess.run(["/bin/true"])
            except PermissionError as e:
                raise RuntimeError("wrapped") from e
            """, options=["--json"])
        self.assertExit(r, 1)
        out = result_json(r)
        err = out["stderr"]
        self.assertIn("RuntimeError: wrapped", err)
        self.assertIn("PermissionError: [Errno 1] pysandbox:", err)
        self.assertNotIn(".pysandbox", err)
        self.assertNotIn(".pysandbox", out["exception"]["traceback"])
        # The PermissionError in the chain is the hook's: the supervisor recorded the block.
        self.assertEqual(out["violations"], [
            {"kind": "call", "what": "subprocess.Popen", "count": 1, "action": "denied"}])

    def test_json_reports_the_block(self):
        r = self.run_script("""
            import os
            print("before", flush=True)
            os.system("true")
            print("after")
            """, options=["--json"])
        self.assertExit(r, 1)
        out = result_json(r)
        self.assertEqual(out["status"], "policy_violation")
        self.assertEqual(out["exit_code"], 1)
        self.assertEqual(out["stdout"], "before\n")
        self.assertEqual(out["violations"],
                         [{"kind": "call", "what": "os.system", "count": 1, "action": "denied"}])
        self.assertEqual(out["exception"]["type"], "PermissionError")
        self.assertEqual(out["exception"]["line"], 7)
        self.assertNotIn(".pysandbox", out["exception"]["traceback"])
        self.assertNotIn(".pysandbox", out["stderr"])
        self.assertEqual(out["enforcement"]["audit_hook"], "installed")
        self.assertNotIn("audit_hook", out["enforcement"]["degraded"])

    def test_caught_and_continued_is_ok_with_the_violation_listed(self):
        r = self.run_script("""
            import os
            for _ in range(3):
                try:
                    os.fork()
                except PermissionError:
                    pass
            print("carried on")
            """, options=["--json"])
        self.assertExit(r, 0)
        out = result_json(r)
        self.assertEqual((out["status"], out["exit_code"], out["stdout"]),
                         ("ok", 0, "carried on\n"))
        self.assertEqual(out["violations"],
                         [{"kind": "call", "what": "os.fork", "count": 3, "action": "denied"}])


class StrictTest(SandboxTestCase):
    def test_denied_imports_are_blocked_as_imports(self):
        for module in ("subprocess", "ctypes", "multiprocessing.pool"):
            with self.subTest(module):
                r = self.run_script(f"import json\nimport {module}\n",
                                    options=["-p", "strict", "--json"])
                self.assertExit(r, 1)
                out = result_json(r)
                self.assertEqual(out["status"], "policy_violation")
                self.assertEqual(out["violations"], [
                    {"kind": "import", "what": module, "count": 1, "action": "denied"}])
                self.assertIn("policy.deny_imports in profile strict", out["stderr"])
                self.assertEqual(out["exception"]["line"], 5)  # after REPORT_HELPER's 3 lines

    def test_open_for_writing_outside_tmp(self):
        r = self.run_script("""
            with open("/tmp/fine.txt", "w") as f:
                f.write("ok")
            with open("/tmp/fine.txt") as f:
                assert f.read() == "ok"
            with open("/etc/ld.so.cache", "rb") as f:
                f.read(1)  # reading outside /tmp is fine
            outcome = {}
            for path in ("/sandbox/out.txt", "/usr/out.txt", "/tmp/../sandbox/out.txt"):
                try:
                    open(path, "w")
                    outcome[path] = "opened"
                except OSError as e:
                    outcome[path] = [e.errno, e.strerror]
            report(outcome)
            """, options=["-p", "strict", "--json"])
        out = result_json(r)
        self.assertEqual(out["status"], "ok", r.describe())
        got = parse_report(out["stdout"].encode())
        for path, outcome in got.items():
            with self.subTest(path):
                self.assertEqual(outcome[0], 1, outcome)
                self.assertIn("blocks open-write-outside-tmp", outcome[1])
        self.assertEqual(call_blocks(out), [{"kind": "call", "what": "open-write-outside-tmp",
                                             "count": 3, "action": "denied"}])

    def test_default_leaves_open_to_the_kernel(self):
        # No open rule in default: the read-only mount answers (EROFS), the hook stays quiet.
        # /sandbox is the script's directory: the host sees that nothing was created there.
        directory = temp_dir(0o777)
        r = self.run_script("""
            try:
                open("/sandbox/out.txt", "w")
            except OSError as e:
                report(e.errno)
            """, options=["--json"], directory=directory)
        out = result_json(r)
        self.assertEqual(parse_report(out["stdout"].encode()), errno.EROFS, r.describe())
        self.assertEqual(out["violations"], [], "neither the hook nor seccomp refused the open")
        self.assertEqual(os.listdir(directory), ["probe.py"])


class DatascienceTest(SandboxTestCase):
    NEEDS_MODULES = ("numpy", "pandas", "matplotlib")

    def test_numpy_pandas_matplotlib_with_the_hook(self):
        wd = temp_dir(0o777)
        r = self.run_script("""
            import numpy as np
            import pandas as pd
            import matplotlib.pyplot as plt
            df = pd.DataFrame({"x": np.arange(10), "y": np.arange(10) ** 2})
            fig, ax = plt.subplots()
            ax.plot(df["x"], df["y"])
            fig.savefig("/tmp/work/plot.png")
            report(int(df["y"].sum()))
            """, options=["-p", "datascience", "--workdir", wd, "--json"], timeout=60)
        out = result_json(r)
        self.assertEqual((out["status"], out["exit_code"]), ("ok", 0), r.describe())
        self.assertEqual(out["enforcement"]["audit_hook"], "installed")
        self.assertEqual(parse_report(out["stdout"].encode()), 285)
        self.assertTrue((wd / "plot.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n"))
        # pandas asks platform for uname -p and matplotlib may run fc-list: the packages' own
        # doing, left to the kernel layers, not the script's violations.
        self.assertEqual(call_blocks(out), [], r.describe())

    def test_the_scripts_own_call_is_still_refused_next_to_the_libraries(self):
        r = self.run_script("""
            import subprocess
            import pandas
            try:
                subprocess.run(["uname", "-p"])
            except PermissionError as e:
                report(e.errno)
            """, options=["-p", "datascience", "--json"], timeout=60)
        out = result_json(r)
        self.assertEqual(parse_report(out["stdout"].encode()), 1, r.describe())
        self.assertEqual(call_blocks(out), [
            {"kind": "call", "what": "subprocess.Popen", "count": 1, "action": "denied"}])


class LibraryAttributionTest(SandboxTestCase):
    NEEDS_MODULES = ("numpy",)

    def test_strict_lets_numpy_use_ctypes_but_not_the_script(self):
        # numpy imports ctypes and loads libraries with it: the package's own doing. The
        # script's `import ctypes` then finds it loaded (Python raises no import event for a
        # module already in sys.modules), so what stops the script is ctypes.dlopen.
        r = self.run_script("""
            import numpy
            report(int(numpy.arange(5).sum()))
            import ctypes
            ctypes.CDLL("libc.so.6")
            """, options=["-p", "strict", "--memory", "256MiB", "--json"], timeout=30)
        out = result_json(r)
        self.assertEqual(parse_report(out["stdout"].encode()), 10, r.describe())
        self.assertEqual(out["status"], "policy_violation", r.describe())
        self.assertEqual(call_blocks(out), [
            {"kind": "call", "what": "ctypes.dlopen", "count": 1, "action": "denied"}])
        self.assertEqual(out["exception"]["line"], 8)  # after REPORT_HELPER's 3 lines

    def test_a_module_the_script_wrote_is_the_scripts_code(self):
        # Only read-only installed packages count as libraries: code in /tmp is the script's.
        r = self.run_script("""
            import os, sys
            with open("/tmp/work/helper_pkg.py", "w") as f:
                f.write("import os\\ndef go():\\n    os.system('true')\\n")
            sys.path.insert(0, "/tmp/work")
            import helper_pkg
            try:
                helper_pkg.go()
            except PermissionError as e:
                report(str(e))
            """, options=["--json"])
        out = result_json(r)
        self.assertIn("the sandbox policy blocks os.system", parse_report(out["stdout"].encode()))
        self.assertEqual(out["violations"], [
            {"kind": "call", "what": "os.system", "count": 1, "action": "denied"}])


class ChannelAbuseTest(SandboxTestCase):
    """fd 4 carries the hook's records; the script can write there too. It is a SOCK_SEQPACKET
    socket that pysandbox drains while the script runs: each write is one record, a record too
    big for a socket message fails (EMSGSIZE), and what pysandbox keeps of the records is
    bounded whatever the script writes."""

    def check_bounded(self, r):
        self.assertLess(len(r.stdout), 64 * 1024, "the result grew with the junk")
        out = result_json(r)
        blocks = call_blocks(out)
        self.assertLessEqual(len(blocks), 100)
        for v in blocks:
            self.assertLessEqual(len(v["what"]), 200)
        return out

    def test_junk_and_fake_records_are_bounded(self):
        r = self.run_script("""
            import os
            written = 0
            chunks = [b"x" * (1 << 20)] * 10 + [
                b"call\\tfake.%d\\n" % i for i in range(5000)] + [
                b"import\\t" + b"m" * 5000 + b"\\n", b"call\\tbad what\\n", b"resource\\tmemory\\n"]
            refused = 0
            for chunk in chunks:
                try:
                    written += os.write(4, chunk)
                except OSError:
                    refused += 1
            report([written, refused])
            """, options=["--json"], timeout=20)
        self.assertLess(r.elapsed, 5, r.describe())
        out = self.check_bounded(r)
        self.assertEqual(out["status"], "ok", r.describe())
        written, refused = parse_report(out["stdout"].encode())
        self.assertLess(written, 1 << 20, "a megabyte write went through as one record")
        self.assertGreater(refused, 0)
        kinds = {v["kind"] for v in out["violations"]}
        self.assertNotIn("resource", kinds, "a record of the script's made a resource kill")

    def test_blocking_writes_do_not_hang_the_run(self):
        # The script may make the descriptor blocking; 10 MiB must still not stall it.
        r = self.run_script("""
            import os
            os.set_blocking(4, True)
            for _ in range(10):
                try:
                    os.write(4, b"x" * (1 << 20))
                except OSError:
                    pass
            for i in range(2000):
                try:
                    os.write(4, b"call\\tfake.%d\\n" % i)
                except OSError:
                    pass
            print("wrote it all")
            """, options=["--json", "--timeout", "8s"], timeout=30)
        out = self.check_bounded(r)
        self.assertEqual(out["status"], "ok", r.describe())
        self.assertEqual(out["stdout"], "wrote it all\n")
        self.assertLess(r.elapsed, 6, r.describe())


class HookConfigurationTest(SandboxTestCase):
    def test_empty_lists_mean_no_hook(self):
        r = self.run_script("""
            import os, sys
            try:
                os.system("true")
            except OSError:
                pass
            report(sorted(m for m in sys.modules if m == "sitecustomize"))
            """, options=["-p", profile(EMPTY_POLICY), "--json"])
        out = result_json(r)
        self.assertEqual(out["status"], "ok", r.describe())
        self.assertEqual(out["enforcement"]["audit_hook"], "off")
        self.assertNotIn("audit_hook", out["enforcement"]["degraded"])
        # The kernel answered instead: seccomp denied the shell's process (glibc's system()
        # forks with clone, or vfork), and the hook blocked nothing.
        self.assertEqual(call_blocks(out), [])
        self.assertTrue(out["violations"], "nothing refused os.system")
        for v in out["violations"]:
            self.assertEqual((v["kind"], v["action"]), ("syscall", "denied"), out["violations"])
            self.assertIn(v["what"], {"clone", "clone3", "fork", "vfork"}, out["violations"])

    def test_the_hook_is_loaded_from_the_bytecode_the_build_compiled(self):
        # The module's directory is new and read-only in every run: without the build's
        # __pycache__ entry Python would compile the hook (sitecustomize's) on every start.
        r = self.run_script("pass\n", options=["--env", "PYTHONVERBOSE=1"])
        self.assertExit(r, 0)
        self.assertRegex(r.stderr.decode(), r"code object from '/sandbox/\.pysandbox/__pycache__/"
                         r"sitecustomize\.cpython-\d+\.pyc'", r.describe())

    def test_flags_that_skip_the_hook_are_refused(self):
        for args in ('["-s", "-I"]', '["-sE"]', '["-S"]'):
            with self.subTest(args):
                prof = profile(f'extends = "default"\n\n[python]\nargs = {args}\n')
                wd = temp_dir(0o777)
                r = run(["run", "-p", prof, "--workdir", wd, "-c",
                         "open('/tmp/work/ran', 'w').close()"])
                self.assertExit(r, 125)
                self.assertIn(b"python.args", r.stderr)
                self.assertEqual(os.listdir(wd), [], "the script ran")

    def test_flags_are_fine_without_a_policy(self):
        prof = profile(EMPTY_POLICY + '\n[python]\nargs = ["-s", "-I"]\n')
        r = run(["run", "-p", prof, "-c", "import sys; print(sys.flags.isolated)"])
        self.assertExit(r, 0)
        self.assertEqual(r.stdout, b"1\n")


class IncidentLogTest(SandboxTestCase):
    def log_path(self):
        return temp_dir(0o777) / "incidents.jsonl"

    def lines(self, log):
        return log.read_text().splitlines() if log.exists() else []

    def test_one_line_per_blocked_run_none_for_a_clean_one(self):
        log = self.log_path()
        blocked = script("import os\nos.system('true')\n", name="blocked.py")
        self.assertExit(run(["run", "--incident-log", log, blocked]), 1)
        self.assertExit(run(["run", "--incident-log", log, script("print('clean')\n")]), 0)
        code = "import subprocess\ntry:\n    subprocess.run(['x'])\nexcept OSError:\n    pass\n"
        self.assertExit(run(["run", "--incident-log", log, "-c", code]), 0)
        lines = self.lines(log)
        self.assertEqual(len(lines), 2, lines)
        first, second = map(json.loads, lines)
        self.assertEqual(first["schema"], "pysandbox.incident/v1")
        self.assertEqual(first["command"], "run")
        self.assertEqual(first["profile"], "default")
        self.assertIn("blocked.py", first["script"])
        self.assertEqual(first["script_sha256"], hashlib.sha256(blocked.read_bytes()).hexdigest())
        self.assertEqual((first["exit_code"], first["signal"]), (1, None))
        self.assertNotIn("status", first, "not logged: it would depend on --json")
        self.assertRegex(first["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
        self.assertEqual(first["blocked"],
                         [{"kind": "call", "what": "os.system", "count": 1, "action": "denied"}])
        self.assertEqual(second["script_sha256"], hashlib.sha256(code.encode()).hexdigest())
        self.assertEqual(second["exit_code"], 0)
        self.assertEqual(second["blocked"], [
            {"kind": "call", "what": "subprocess.Popen", "count": 1, "action": "denied"}])

    def test_kernel_denials_are_incidents_resource_limits_are_not(self):
        log = self.log_path()
        self.assertExit(run(["run", "--incident-log", log, "-c",
                             "import socket\ntry:\n    socket.socket(socket.AF_INET)\n"
                             "except OSError:\n    pass\n"]), 0)
        self.assertExit(run(["run", "--incident-log", log, "--timeout", "1s", "-c",
                             "while True: pass"]), 124)
        lines = self.lines(log)
        self.assertEqual(len(lines), 1, lines)
        entry = json.loads(lines[0])
        self.assertEqual(entry["blocked"],
                         [{"kind": "syscall", "what": "socket", "count": 1, "action": "denied"}])

    def test_human_and_json_runs_log_the_same_entry(self):
        # The same run, human and --json: the incident must say the same thing. (Its status
        # would not: without --json the traceback is not kept, so an exception looks like an
        # error. The exit is logged instead.)
        log = self.log_path()
        path = script("import socket\nsocket.socket(socket.AF_INET)\n")
        r = run(["run", "--json", "--incident-log", log, path])
        self.assertEqual(result_json(r)["exit_code"], 1)
        run(["run", "--incident-log", log, path])
        entries = [json.loads(line) for line in self.lines(log)]
        self.assertEqual(len(entries), 2)
        for entry in entries:
            del entry["time"]
        self.assertEqual(entries[0], entries[1])
        self.assertEqual((entries[0]["exit_code"], entries[0]["signal"]), (1, None))

    def test_policy_incident_log_key(self):
        log = self.log_path()
        prof = profile(f'extends = "default"\n\n[policy]\nincident_log = "{log}"\n')
        self.assertExit(run(["run", "-p", prof, "-c", "import os; os.fork()"]), 1)
        lines = self.lines(log)
        self.assertEqual(len(lines), 1, lines)
        self.assertEqual(json.loads(lines[0])["profile"], str(prof))

    def test_parallel_runs_append_whole_lines(self):
        log = self.log_path()
        path = script("import os, sys\nos.system('run ' + sys.argv[1])\n")

        def one(i):
            return subprocess.run(command_prefix() + [PYSANDBOX, "run", "--incident-log",
                                                      str(log), str(path), "--", self.marker],
                                  capture_output=True, timeout=60).returncode

        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(one, range(8)))
        self.assertEqual(codes, [1] * 8)
        raw = log.read_bytes()
        self.assertTrue(raw.endswith(b"\n"))
        lines = raw.decode().splitlines()
        self.assertEqual(len(lines), 8, raw)
        for line in lines:
            entry = json.loads(line)  # whole, not interleaved
            self.assertEqual(entry["blocked"][0]["what"], "os.system")
        self.assertEqual(os.stat(log).st_mode & 0o777, 0o600)

    def test_symlink_is_refused_and_the_target_untouched(self):
        d = temp_dir(0o777)
        target = d / "target"
        target.write_text("original\n")
        os.chmod(target, 0o666)
        before = os.stat(target)
        (d / "link").symlink_to(target)
        wd = temp_dir(0o777)
        r = run(["run", "--incident-log", d / "link", "--workdir", wd, "-c",
                 "open('/tmp/work/ran', 'w').close()\nimport os\nos.system('x')\n"])
        self.assertExit(r, 125)
        self.assertIn(b"incident", r.stderr)
        self.assertEqual(target.read_text(), "original\n")
        self.assertEqual(os.stat(target).st_mtime_ns, before.st_mtime_ns)
        self.assertEqual(os.listdir(wd), [], "the script ran")

    def test_unopenable_path_is_125_and_the_script_does_not_run(self):
        d = temp_dir(0o777)
        for path in (d / "missing-dir" / "log", d):  # no such directory; a directory
            with self.subTest(str(path)):
                wd = temp_dir(0o777)
                r = run(["run", "--incident-log", path, "--workdir", wd, "-c",
                         "open('/tmp/work/ran', 'w').close()\nimport os\nos.system('x')\n"])
                self.assertExit(r, 125)
                self.assertEqual(os.listdir(wd), [], "the script ran")

    def test_missing_script_creates_no_log(self):
        log = self.log_path()
        r = run(["run", "--incident-log", log, temp_dir() / "missing.py"])
        self.assertExit(r, 125)
        self.assertFalse(log.exists())


if __name__ == "__main__":
    unittest.main()
