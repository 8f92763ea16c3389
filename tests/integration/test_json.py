"""--json: one result object (schema pysandbox.result/v1) for every outcome.

Each status has a test that produces it, and every field of the schema is asserted
somewhere below (FIELDS_ASSERTED is checked against the keys the binary emits). The
exit code and the bytes on the pipes are judged on the host side; the JSON must agree
with them.
"""

import base64
import json
import re
import signal
import subprocess
import unittest

from harness import (PYSANDBOX, REPORT_HELPER, SandboxTestCase, expected_host_uid, landlock_abi,
                     run, script)

SCHEMA = "pysandbox.result/v1"
TOP_LEVEL_FIELDS = {
    "schema", "version", "status", "exit_code", "signal", "pysandbox_exit_code", "message",
    "stdout", "stderr", "encoding", "output", "truncated", "bytes", "exception", "violations",
    "files", "files_omitted", "syscalls", "usage", "limits", "enforcement", "profile", "error",
    "warnings",
}


def interleaved(obj) -> str:
    """Both streams in arrival order, rebuilt from "output" (segments over the kept bytes)."""
    streams = {name: obj[name].encode() for name in ("stdout", "stderr")}
    offsets = {"stdout": 0, "stderr": 0}
    text = b""
    for name, length in obj["output"]:
        text += streams[name][offsets[name]:offsets[name] + length]
        offsets[name] += length
    return text.decode()


def version() -> str:
    out = subprocess.run([PYSANDBOX, "--version"], capture_output=True, text=True, check=True)
    return out.stdout.split()[-1]



def landlock_rights(abi: int, net: str) -> list[str]:
    """What enforcement.landlock_rights lists on a kernel of Landlock ABI ``abi`` under ``--net
    net``: each part from the ABI that brought it."""
    rights = [("fs", abi >= 1), ("ioctl_dev", abi >= 5), ("tcp", abi >= 4 and net != "loopback"),
              ("scopes", abi >= 6)]
    return [name for name, handled in rights if handled]

class JsonTestCase(SandboxTestCase):
    def run_json(self, body: str, *args: str, options=(), **kwargs):
        """Run ``body`` with --json; return (result, parsed object)."""
        r = self.run_script(body, *args, options=["--json", *options], **kwargs)
        return r, self.parse(r)

    def parse(self, r):
        obj = r.json()  # exactly one line, valid under the result schema
        self.assertEqual(set(obj), TOP_LEVEL_FIELDS, r.describe())
        self.assertEqual(obj["schema"], SCHEMA)
        self.assertEqual(obj["pysandbox_exit_code"], r.returncode, r.describe())
        return obj


class StatusTest(JsonTestCase):
    def test_ok_and_every_field_of_a_clean_run(self):
        r, obj = self.run_json(
            # Two pipes have no common order: the writes are spaced so the supervisor sees each
            # one before the next (the order it saw is what "output" promises).
            "import sys, time\nprint('out1', flush=True)\ntime.sleep(0.2)\n"
            "print('err1', file=sys.stderr, flush=True)\ntime.sleep(0.2)\n"
            "print('out2', flush=True)\n",
            options=["--timeout", "7s", "--memory", "200MiB"])
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stderr, b"", "nothing of pysandbox's own on a clean --json run")
        self.assertEqual(obj["status"], "ok")
        self.assertEqual(obj["version"], version())
        self.assertEqual(obj["exit_code"], 0)
        self.assertIsNone(obj["signal"])
        self.assertIsNone(obj["message"])
        self.assertEqual(obj["stdout"], "out1\nout2\n")
        self.assertEqual(obj["stderr"], "err1\n")
        self.assertEqual(obj["encoding"], {"stdout": "utf-8", "stderr": "utf-8"})
        self.assertEqual(obj["output"], [["stdout", 5], ["stderr", 5], ["stdout", 5]])
        self.assertEqual(interleaved(obj), "out1\nerr1\nout2\n", "arrival order")
        self.assertEqual(obj["truncated"], {"stdout": False, "stderr": False})
        self.assertEqual(obj["bytes"], {"stdout": 10, "stderr": 5})
        self.assertIsNone(obj["exception"])
        self.assertEqual(obj["violations"], [])
        self.assertEqual(obj["files"], [])
        self.assertEqual(obj["files_omitted"], 0)
        self.assertIsNone(obj["syscalls"])
        self.assertIsNone(obj["error"])
        self.assertEqual(obj["warnings"], [])
        self.assertEqual(obj["profile"], "default")

        usage = obj["usage"]
        self.assertEqual(set(usage), {"wall_ms", "cpu_ms", "max_rss_kib", "setup_ms", "collect_ms"})
        self.assertGreaterEqual(usage["collect_ms"], 0)
        # Whole milliseconds: a set-up of 0.9 ms reads 0 (it takes 1-2 ms here).
        self.assertIsInstance(usage["setup_ms"], int)
        self.assertGreaterEqual(usage["setup_ms"], 0)
        self.assertLess(usage["setup_ms"] + usage["wall_ms"], r.elapsed * 1000 + 5)
        self.assertGreater(usage["wall_ms"], 0)
        self.assertGreaterEqual(usage["cpu_ms"], 0)
        self.assertGreater(usage["max_rss_kib"], 1024, "python3 needs more than 1 MiB")

        limits = obj["limits"]
        self.assertEqual(limits["wall_time_ms"], 7000)
        self.assertEqual(limits["memory_bytes"], 200 << 20)
        self.assertEqual(limits["cpu_time_ms"], 5000)
        self.assertEqual(limits["max_procs"], 64)
        self.assertEqual(limits["tmp_size_bytes"], 64 << 20)
        self.assertEqual(limits["output_limit_bytes"], 16 << 20)
        self.assertEqual(limits["open_files"], 256)
        self.assertEqual(limits["file_size_bytes"], 64 << 20)
        self.assertEqual(limits["network"], "none")

        enforcement = obj["enforcement"]
        self.assertEqual(set(enforcement["namespaces"]),
                         {"user", "mount", "pid", "network", "ipc", "uts", "cgroup"})
        self.assertEqual(enforcement["seccomp"], "errno")
        self.assertIsInstance(enforcement["landlock"], int, "this host has Landlock")
        self.assertTrue(enforcement["no_new_privs"])
        self.assertEqual(enforcement["capabilities"], [])
        self.assertEqual(enforcement["resources"], "rlimit", "this host has no cgroup v2")
        self.assertEqual(enforcement["degraded"], ["cgroup"])
        self.assertEqual(enforcement["audit_hook"], "installed", "the default profile has a [policy]")
        self.assertEqual(enforcement["host_uid"], expected_host_uid())
        self.assertEqual(enforcement["landlock_rights"], landlock_rights(landlock_abi(), "none"))

    def test_landlock_rights_follow_the_kernel_and_the_network_mode(self):
        # TCP is Landlock's under none and proxy; under loopback the network namespace alone
        # bounds it (Landlock restricts ports, not addresses).
        for net in ("none", "loopback", "proxy"):
            with self.subTest(net=net):
                r, obj = self.run_json("pass\n", options=["--net", net])
                self.assertEqual(obj["status"], "ok", r.describe())
                self.assertEqual(obj["enforcement"]["landlock_rights"],
                                 landlock_rights(landlock_abi(), net))

    def test_error_is_a_nonzero_exit_without_exception(self):
        r, obj = self.run_json("import sys\nprint('bye', file=sys.stderr)\nsys.exit(3)\n")
        self.assertEqual(r.returncode, 3)
        self.assertEqual(obj["status"], "error")
        self.assertEqual(obj["exit_code"], 3)
        self.assertIsNone(obj["exception"])
        self.assertEqual(obj["stderr"], "bye\n")

    def test_sys_exit_with_a_message_is_an_error_not_an_exception(self):
        r, obj = self.run_json("import sys\nsys.exit('Error: not a traceback')\n")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(obj["status"], "error")
        self.assertIsNone(obj["exception"])

    def test_exception(self):
        r, obj = self.run_json("def f(x):\n    return 1 / x\n\nprint('before')\nf(0)\n")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(obj["status"], "exception")
        e = obj["exception"]
        self.assertEqual(e["type"], "ZeroDivisionError")
        self.assertEqual(e["message"], "division by zero")
        # The probe has REPORT_HELPER's lines in front of the body.
        offset = len(REPORT_HELPER.lstrip().splitlines())
        self.assertEqual(e["line"], offset + 2, "where it was raised, in the script")
        self.assertTrue(e["traceback"].startswith("Traceback (most recent call last):\n"))
        # The caller's path for the script, as given (an absolute one here), not /sandbox/NAME.
        self.assertRegex(e["traceback"], r'File "(?!/sandbox/)/[^"]*/probe\.py", line')
        self.assertNotIn("/sandbox/.pysandbox", e["traceback"])
        self.assertTrue(e["traceback"].endswith("ZeroDivisionError: division by zero\n"))
        self.assertEqual(e["summary"], f"ZeroDivisionError: division by zero (line {offset + 2})")
        self.assertIsNone(e["hint"])
        self.assertEqual(obj["stdout"], "before\n")

    def test_syntax_error_is_an_exception(self):
        path = script("x = 1\nprint((x)\n")
        r = run(["run", "--json", path])
        obj = self.parse(r)
        self.assertEqual(obj["status"], "exception")
        self.assertEqual(obj["exception"]["type"], "SyntaxError")
        self.assertEqual(obj["exception"]["line"], 2)
        self.assertIn("never closed", obj["exception"]["message"])

    def test_exception_from_dash_c_and_stdin(self):
        obj = self.parse(run(["run", "--json", "-c", "x = 1\nraise KeyError('k')"]))
        self.assertEqual(obj["status"], "exception")
        self.assertEqual((obj["exception"]["type"], obj["exception"]["line"]), ("KeyError", 2))
        obj = self.parse(run(["run", "--json", "-"], input=b"import nosuchmodule\n"))
        self.assertEqual(obj["exception"]["type"], "ModuleNotFoundError")
        self.assertEqual(obj["exception"]["line"], 1)
        self.assertIn("standard library", obj["exception"]["hint"])

    def test_timeout(self):
        r, obj = self.run_json("while True: pass\n", options=["--timeout", "500ms"])
        self.assertEqual(r.returncode, 124)
        self.assertEqual(obj["status"], "timeout")
        self.assertIsNone(obj["exit_code"])
        self.assertEqual(obj["message"],
                         "wall-clock limit of 500ms reached; the sandbox was killed")
        self.assertIn({"kind": "resource", "what": "wall_time", "count": 1, "action": "killed"},
                      obj["violations"])

    def test_memory_error_at_the_limit(self):
        # The script's memory grows until the kernel refuses: the measured peak is near the limit.
        r, obj = self.run_json("chunks = []\nwhile True:\n    chunks.append(b'x' * 2**20)\n",
                               options=["--memory", "64MiB"])
        self.assertEqual(r.returncode, 1)
        self.assertEqual(obj["status"], "memory_limit")
        self.assertEqual(obj["exception"]["type"], "MemoryError")
        self.assertIn("--memory", obj["exception"]["hint"])
        self.assertIn({"kind": "resource", "what": "memory", "count": 1, "action": "killed"},
                      obj["violations"])
        self.assertGreaterEqual(obj["usage"]["max_rss_kib"] * 1024, 32 * 2**20)

    def test_one_allocation_over_the_limit_is_memory_limit(self):
        # One allocation too big to make leaves the measured peak far below the limit, but the
        # supervisor saw the kernel refuse it at the address-space limit (the allocation watch):
        # that is evidence the limit was reached.
        r, obj = self.run_json("b = bytearray(512 * 2**20)\n", options=["--memory", "64MiB"])
        self.assertEqual(r.returncode, 1)
        self.assertEqual(obj["status"], "memory_limit")
        self.assertEqual(obj["exception"]["type"], "MemoryError")
        self.assertIn("--memory", obj["exception"]["hint"])
        # Far below the limit: within a few MiB of an empty run's peak (which, in a sanitizer
        # build, holds the instrumented child's footprint from before the interpreter's exec).
        _, empty = self.run_json("pass\n", options=["--memory", "64MiB"])
        self.assertLess(obj["usage"]["max_rss_kib"], empty["usage"]["max_rss_kib"] + 8 * 1024)

    def test_a_memory_error_the_script_raises_is_an_exception(self):
        # No allocation failed: a script can raise MemoryError itself, and that is its word.
        # A limit far above the peak, also in a sanitizer build, where the peak holds the
        # instrumented child's footprint from before the exec.
        r, obj = self.run_json("raise MemoryError('made up')\n", options=["--memory", "512MiB"])
        self.assertEqual(r.returncode, 1)
        self.assertEqual(obj["status"], "exception")
        self.assertEqual(obj["exception"]["type"], "MemoryError")

    def test_cpu_limit(self):
        r, obj = self.run_json("while True: pass\n",
                               options=["--cpu-time", "1s", "--timeout", "10s"])
        self.assertEqual(r.returncode, 128 + signal.SIGXCPU, r.describe())
        self.assertEqual(obj["status"], "cpu_limit")
        self.assertEqual(obj["signal"], "SIGXCPU")
        # The kernel counts the limit in scheduler ticks, getrusage in run time: on a busy VM
        # the two differ by up to a quarter (the status needs at least half the limit).
        self.assertGreaterEqual(obj["usage"]["cpu_ms"], 500)
        self.assertIn("CPU time limit of 1s", obj["message"])

    def test_output_limit(self):
        r, obj = self.run_json("import sys\nsys.stdout.write('x' * 1000000)\n",
                               options=["--output-limit", "64KiB"])
        self.assertEqual(r.returncode, 0)
        self.assertEqual(obj["status"], "output_limit")
        self.assertEqual(obj["truncated"], {"stdout": True, "stderr": False})
        self.assertEqual(obj["bytes"]["stdout"], 1000000)
        kept = 32 * 1024 + 16 * 1024
        marker = f"\n[... {1000000 - kept} bytes omitted ...]\n"
        self.assertEqual(obj["stdout"], "x" * (32 * 1024) + marker + "x" * (16 * 1024))
        self.assertEqual(obj["output"], [["stdout", len(obj["stdout"])]])

    def test_killed_by_a_signal(self):
        r, obj = self.run_json("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
        self.assertEqual(r.returncode, 128 + 9)
        self.assertEqual(obj["status"], "killed")
        self.assertEqual(obj["signal"], "SIGKILL")
        self.assertIsNone(obj["exit_code"])

    def test_policy_violation(self):
        r, obj = self.run_json("import os\nos.chroot('/tmp')\nprint('after')\n",
                               options=["-p", "strict"])
        self.assertEqual(r.returncode, 128 + signal.SIGSYS)
        self.assertEqual(obj["status"], "policy_violation")
        self.assertEqual(obj["stdout"], "")
        self.assertEqual(obj["violations"],
                         [{"kind": "syscall", "what": "chroot", "count": 1, "action": "killed"}])
        self.assertEqual(obj["enforcement"]["seccomp"], "kill")
        self.assertEqual(obj["profile"], "strict")

    def test_denied_calls_are_violations_even_when_the_script_goes_on(self):
        r, obj = self.run_json(
            "import os\nfor _ in range(2):\n    try:\n        os.chroot('/tmp')\n"
            "    except PermissionError:\n        pass\nprint('went on')\n")
        self.assertEqual(r.returncode, 0)
        self.assertEqual(obj["status"], "ok")
        self.assertEqual(obj["violations"],
                         [{"kind": "syscall", "what": "chroot", "count": 2, "action": "denied"}])

    def test_sandbox_error_for_a_missing_interpreter(self):
        prof = script('extends = "default"\n[python]\ninterpreter = "/usr/bin/no-such-python"\n',
                      name="p.toml")
        r, obj = self.run_json("print(1)\n", options=["-p", str(prof)])
        self.assertEqual(r.returncode, 127)
        self.assertEqual(obj["status"], "sandbox_error")
        self.assertEqual(obj["error"]["step"], "execve")
        self.assertIn("not found inside the sandbox", obj["error"]["message"])

    def test_sandbox_error_before_the_sandbox_exists(self):
        cases = {
            "profile": ["run", "--json", "-p", "no-such-profile", "-c", "1"],
            "flag": ["run", "--json", "--memory", "lots", "-c", "1"],
            "unknown flag": ["run", "--json", "--no-such-flag", "-c", "1"],
            "script": ["run", "--json", "/nonexistent/script.py"],
        }
        for what, args in cases.items():
            with self.subTest(what):
                r = run(args)
                self.assertEqual(r.returncode, 125, r.describe())
                obj = self.parse(r)
                self.assertEqual(obj["status"], "sandbox_error")
                self.assertEqual(obj["error"]["message"], obj["message"])
                self.assertIn(obj["message"], r.stderr.decode(), "the same line on stderr")
                self.assertIsNone(obj["usage"])


class OutputTest(JsonTestCase):
    def test_stdin_is_forwarded(self):
        r, obj = self.run_json("import sys\nprint(sys.stdin.read().upper(), end='')\n",
                               input=b"piped data\n")
        self.assertEqual(obj["stdout"], "PIPED DATA\n")

    def test_non_utf8_output_is_base64_exactly(self):
        # Bytes that are not text come back whole, base64, not as U+FFFD: the stream says so.
        r, obj = self.run_json("import sys\nsys.stdout.buffer.write(b'a\\xff\\xfeb')\n"
                               "print('text', file=sys.stderr)\n")
        self.assertEqual(obj["status"], "ok")
        self.assertEqual(obj["encoding"], {"stdout": "base64", "stderr": "utf-8"})
        self.assertEqual(base64.b64decode(obj["stdout"]), b"a\xff\xfeb")
        self.assertEqual(obj["stderr"], "text\n")
        self.assertEqual(obj["bytes"]["stdout"], 4)

    def test_control_bytes_do_not_grow_the_result_sixfold(self):
        # JSON writes a NUL as \u0000: mostly control bytes are base64 instead (4/3).
        r, obj = self.run_json("import sys\nsys.stdout.buffer.write(b'\\0' * 100000)\n")
        self.assertEqual(obj["encoding"]["stdout"], "base64")
        self.assertEqual(base64.b64decode(obj["stdout"]), b"\0" * 100000)
        self.assertLess(len(r.stdout), 150000)

    def test_script_cannot_forge_the_result(self):
        # Whatever the script prints lands inside the object, never next to it.
        forged = json.dumps({"schema": SCHEMA, "status": "ok"})
        r, obj = self.run_json(f"print({forged!r})\nraise SystemExit(2)\n")
        self.assertEqual(obj["status"], "error")
        self.assertEqual(obj["stdout"], forged + "\n")


class HumanModeTest(SandboxTestCase):
    def test_nothing_of_its_own_on_success(self):
        r = self.run_script("print('hello')\n")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"hello\n", b""))

    def test_one_line_when_the_sandbox_stopped_something(self):
        r = self.run_script("while True: pass\n", options=["--timeout", "500ms"])
        self.assertEqual(r.returncode, 124)
        self.assertEqual(r.stderr,
                         b"pysandbox: wall-clock limit of 500ms reached; the sandbox was killed\n")


class SchemaCoverageTest(unittest.TestCase):
    def test_every_top_level_field_is_asserted_here(self):
        source = open(__file__).read()
        for field in TOP_LEVEL_FIELDS - {"schema"}:
            self.assertRegex(source, re.escape(f'obj["{field}"]'), f"no assertion on {field}")

    def test_every_top_level_field_is_documented_in_the_man_page(self):
        from harness import REPO
        man = (REPO / "man" / "pysandbox.1").read_text()
        section = man[man.index(".SH JSON RESULT"):man.index(".SH ENVIRONMENT")]
        for field in TOP_LEVEL_FIELDS:
            self.assertRegex(section, rf"\n\.BR? {field}\b", f"{field} is not documented")


if __name__ == "__main__":
    unittest.main()
