"""Packages a request asks for itself: a batch job's and an MCP run_python's or start_session's
`requirements`. The front installs them with pip inside a sandbox (`pysandbox env create`, in a
child process its loop watches), from its profile's sources, into its store; every sandbox of that
environment mounts it read-only. The same packages asked for again go at once, from what the front
remembers; an install that fails answers its own request with install_error and nothing else.

Judged from the host: the results, the lines the front says on stderr for each environment it
installed, the store's directories, a verify of the environment; a wheelhouse emptied after the
first install (a second install could not succeed); an index that holds pip's first request until
the test lets it go (another request answered meanwhile shows the loop was not blocked).
"""

import json
import os
import subprocess
import sys
import time
import unittest
from pathlib import Path

from harness import profile, run
from test_env import INSTALL_ERROR, EnvTestCase, Index, mcp_answer
from test_session import HOST_PID_NAMESPACE, SandboxWatch, pid_namespace, process_identity

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the support package
from support.env import PYSANDBOX, command_prefix  # noqa: E402
from support.result_schema import parse_lines, validate  # noqa: E402

INSTALLED = b"into a new environment"

# Whether the package was preloaded (the profile preloads usespkg: only an environment's
# sandboxes, and its zygote, have it), where it comes from, and that it cannot be changed.
PROBE = ("import sys\n"
         "print('preloaded' if 'usespkg' in sys.modules else 'not preloaded')\n"
         "import usespkg\n"
         "print(usespkg.VALUE, usespkg.__file__)\n"
         "try:\n"
         "    open(usespkg.__file__, 'a').write('changed')\n"
         "    print('wrote')\n"
         "except OSError as e:\n"
         "    print('refused', e.errno)\n")
WHERE = "import os\nprint(os.readlink('/proc/self/ns/pid'))\n"
# A job forked by a zygote goes on as the zygote's interpreter, command line and all.
BIRTH = ("print('forked' if b'pysandbox_zygote' in open('/proc/self/cmdline', 'rb').read() "
         "else 'cloned')\n")
PLAIN = "import importlib.util\nprint(importlib.util.find_spec('usespkg') is None)\n"


class McpClient:
    """`pysandbox mcp OPTIONS` on stdio, its answers read as they come."""

    def __init__(self, options):
        self.proc = subprocess.Popen(command_prefix() + [PYSANDBOX, "mcp", *options],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.send(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "test", "version": "1"}})
        assert self.answer()["id"] == 0

    def send(self, message_id, method, params):
        line = {"jsonrpc": "2.0", "id": message_id, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(line).encode() + b"\n")
        self.proc.stdin.flush()

    def call(self, message_id, tool, arguments):
        self.send(message_id, "tools/call", {"name": tool, "arguments": arguments})

    def answer(self):
        line = self.proc.stdout.readline()
        assert line, "the server ended without an answer"
        return json.loads(line)

    def close(self):
        """The server's exit code and stderr, once its input is closed."""
        self.proc.stdin.close()
        stderr = self.proc.stderr.read()
        return self.proc.wait(timeout=60), stderr


def interpreters(watch: SandboxWatch) -> dict:
    """The sandboxed interpreters among the front's descendants: identity -> PID namespace."""
    found = {}
    for pid in watch.family():
        namespace = pid_namespace(pid)
        try:
            if namespace not in ("", HOST_PID_NAMESPACE) and \
                    os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("python"):
                found[process_identity(pid)] = namespace
        except OSError:
            pass  # gone meanwhile
    return found


def boot_ticks() -> int:
    """Now, in the unit of a process's start time in /proc/PID/stat."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def packaged(identity) -> bool:
    """Whether the process's sandbox has an environment mounted."""
    try:
        with open(f"/proc/{identity[0]}/mountinfo") as mounts:
            return " /sandbox/.packages " in mounts.read()
    except OSError:
        return False


def warm_sandbox(watch: SandboxWatch, after: int, besides: str, timeout: float = 30) -> str:
    """The PID namespace of a sandbox with an environment, started after `after` (boot ticks)
    and not in namespace `besides`, once there is one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for identity, namespace in interpreters(watch).items():
            if identity[1] > after and namespace != besides and packaged(identity):
                return namespace
        time.sleep(0.01)
    raise AssertionError(f"no warm sandbox was started: {interpreters(watch)}")


class RequestRequirementsTest(EnvTestCase):
    def profile(self, sources=None):
        sources = sources or f'find_links = ["{self.house}"]'
        return profile(f'extends = "default"\n[python]\n{sources}\npreload = ["usespkg"]\n')

    def assert_probe(self, result, what):
        self.assertEqual(result["status"], "ok", (what, result))
        lines = result["stdout"].splitlines()
        self.assertEqual(lines[:2], ["preloaded", "43 /sandbox/.packages/usespkg/__init__.py"],
                         (what, result))
        # EROFS (the mount); for root's runs the files are root's, so EACCES may come first.
        self.assertIn(lines[2], ("refused 30", "refused 13"), (what, result))

    def assert_one_environment(self):
        envs = os.listdir(self.store / "envs")
        self.assertEqual(len(envs), 1, envs)
        r = self.env("show", envs[0], "--verify")
        self.assertEqual(r.returncode, 0, r.describe())
        return envs[0]

    def test_mcp_calls_and_sessions_install_once_then_reuse(self):
        client = McpClient(["-p", str(self.profile()), "--cache-dir", str(self.store)])
        try:
            watch = SandboxWatch(client.proc.pid)
            client.call(1, "run_python", {"code": PROBE, "requirements": ["usespkg"]})
            first = client.answer()
            self.assertEqual(first["id"], 1, first)
            self.assert_probe(validate(first["result"]["structuredContent"]), "run_python")
            answered = boot_ticks()
            # Nothing could be installed again now: the packages are gone from the source.
            for wheel in self.house.glob("*.whl"):
                wheel.unlink()
            client.call(2, "start_session", {"requirements": ["usespkg"]})
            started = client.answer()["result"]["structuredContent"]
            client.call(3, "run_python", {"code": WHERE + "import usespkg\nusespkg.VALUE",
                                          "session_id": started["session_id"]})
            cell = client.answer()["result"]["structuredContent"]
            self.assertEqual(cell["value"], "43", cell)
            # The environment's pool starts a sandbox ahead of the next call, as the profile's
            # does (the first call's sandbox started before it was answered; the session's
            # lives on, so no other sandbox has its namespace's number meanwhile): the call
            # runs in it.
            warm = warm_sandbox(watch, answered, cell["stdout"].strip())
            client.call(4, "run_python", {"code": PROBE + WHERE, "requirements": ["usespkg"]})
            again = client.answer()["result"]["structuredContent"]
            self.assert_probe(again, "again")
            self.assertEqual(again["stdout"].splitlines()[3], warm, again)
            # Other packages would be a new install, and the source has none now: that call
            # alone is answered with the install_error, and the server goes on.
            client.call(6, "run_python", {"code": "print('never')", "requirements": ["tinypkg"]})
            failed = client.answer()["result"]
            self.assertTrue(failed["isError"], failed)
            self.assertIn("install_error", failed["content"][0]["text"])
            self.assertIn("tinypkg", failed["content"][0]["text"])
            result = validate(failed["structuredContent"])
            self.assertEqual((result["status"], result["id"]), ("install_error", 6), result)
            client.call(5, "run_python", {"code": PLAIN})
            self.assertEqual(client.answer()["result"]["structuredContent"]["stdout"], "True\n",
                             "a call without requirements has no packages")
        finally:
            code, stderr = client.close()
        self.assertEqual(code, 0, stderr)
        self.assertEqual(stderr.count(INSTALLED), 1, stderr)
        self.assert_one_environment()

    def test_batch_jobs_with_and_without_requirements_cloned_and_forked(self):
        named = self.profile()
        jobs = [{"id": "plain", "code": PLAIN + BIRTH},
                {"id": "pkg", "code": PROBE + BIRTH, "requirements": ["usespkg"]},
                {"id": "missing", "code": "print('never')", "requirements": ["nosuchpkg"]},
                {"id": "bad", "code": "print('never')", "requirements": ["--index-url=http://x"]},
                {"id": "pkg2", "code": PROBE + BIRTH, "requirements": ["usespkg"]},
                {"id": "plain2", "code": PLAIN + BIRTH}]
        text = "".join(json.dumps(job) + "\n" for job in jobs).encode()
        for fork in ([], ["--fork"]):
            with self.subTest(fork=fork):
                if fork:
                    jobs = [job for job in jobs if job["id"] != "missing"]  # one failure is enough
                    text = "".join(json.dumps(job) + "\n" for job in jobs).encode()
                r = run(["batch", *fork, "-p", str(named), "--cache-dir", str(self.store), "-"],
                        input=text, timeout=120)
                self.assertEqual(r.returncode, 0, r.describe())
                results = {result["id"]: result for result in parse_lines(r.stdout)}
                self.assertEqual(set(results), {job["id"] for job in jobs}, r.describe())
                # With --fork each job is forked by its zygote: the profile's, or the
                # environment's, which alone could preload the package (assert_probe).
                birth = "forked" if fork else "cloned"
                for plain in ("plain", "plain2"):
                    self.assertEqual((results[plain]["status"], results[plain]["stdout"]),
                                     ("ok", f"True\n{birth}\n"), results[plain])
                for pkg in ("pkg", "pkg2"):
                    self.assert_probe(results[pkg], f"batch {fork}")
                    self.assertEqual(results[pkg]["stdout"].splitlines()[3], birth, results[pkg])
                self.assertEqual(results["bad"]["status"], "bad_request")
                self.assertIn('requirements[0]: "--index-url=http://x" is not a requirement',
                              results["bad"]["message"])
                if not fork:
                    missing = results["missing"]
                    self.assertEqual(missing["status"], "install_error", missing)
                    self.assertEqual(missing["pysandbox_exit_code"], INSTALL_ERROR)
                    self.assertIn("nosuchpkg", missing["message"])
                    self.assertEqual(missing["line"], 3)
                # Built by the first batch only: the second finds it in the store.
                self.assertEqual(r.stderr.count(INSTALLED), 0 if fork else 1, r.describe())
        env_id = self.assert_one_environment()
        # --with-env names the one environment of every sandbox: a job cannot add to it.
        r = run(["batch", "-p", str(named), "--cache-dir", str(self.store), "--with-env",
                 env_id, "-"], input=text, timeout=120)
        results = {result["id"]: result for result in parse_lines(r.stdout)}
        self.assertEqual(results["pkg"]["status"], "bad_request", results["pkg"])
        self.assertIn("--with-env", results["pkg"]["message"])
        self.assertEqual(results["plain"]["status"], "ok", results["plain"])

    def test_bad_requirements_are_refused_and_change_nothing(self):
        options = ["-p", str(self.profile()), "--cache-dir", str(self.store)]
        for value, message in (("usespkg", '"requirements" must be an array of strings'),
                               (["usespkg", 3], '"requirements" must be an array of strings'),
                               (["-r /etc/shadow"], "is not a requirement"),
                               (["a\nb"], "is not a requirement")):
            with self.subTest(value=value):
                answer = mcp_answer({"code": "print('never')", "requirements": value}, options)
                self.assertTrue(answer.get("isError"), answer)
                self.assertIn(message, answer["content"][0]["text"])
        answer = mcp_answer({"code": "print('never')", "session_id": "x",
                             "requirements": ["usespkg"]}, options)
        self.assertIn("start_session", answer["content"][0]["text"])
        self.assertFalse((self.store / "envs").exists() and os.listdir(self.store / "envs"))
        # A session's cell cannot: its one sandbox has its packages from the start.
        r = run(["session", "--ndjson"],
                input=b'{"id": 1, "code": "1", "requirements": ["usespkg"]}\n', timeout=60)
        result = parse_lines(r.stdout)[0]
        self.assertEqual(result["status"], "bad_request", result)
        self.assertIn("python.requirements", result["message"])

    def test_other_requests_are_served_while_an_install_runs(self):
        """pip's first request to the index waits until the test releases it: while it waits,
        a call and a job without packages are answered (the front's loop is not blocked), and a
        second request for the same packages waits for the same install."""
        for front in ("mcp", "batch"):
            with self.subTest(front=front):
                index = Index(self.house, hold=True)
                named = self.profile(f'index_url = "{index.url}"')
                try:
                    if front == "mcp":
                        self.check_mcp_meanwhile(named, index)
                    else:
                        self.check_batch_meanwhile(named, index)
                finally:
                    index.close()
                # One install for both requests of it: pip asked the index for usespkg once.
                self.assertEqual(index.paths.count("/simple/usespkg/"), 1, index.paths)

    def check_mcp_meanwhile(self, named, index):
        client = McpClient(["-p", str(named), "--cache-dir", str(self.store)])
        try:
            client.call(1, "run_python", {"code": PROBE, "requirements": ["usespkg"]})
            client.call(2, "start_session", {"requirements": ["usespkg"]})
            self.assertTrue(index.entered.wait(60), "pip never reached the index")
            client.call(3, "run_python", {"code": "print('meanwhile')"})
            answer = client.answer()
            self.assertEqual(answer["id"], 3, answer)
            self.assertFalse(index.released.is_set())
            self.assertEqual(answer["result"]["structuredContent"]["stdout"], "meanwhile\n")
            index.release()
            answers = {a["id"]: a["result"] for a in (client.answer(), client.answer())}
            self.assert_probe(answers[1]["structuredContent"], "held run_python")
            self.assertIn("session_id", answers[2]["structuredContent"])
        finally:
            code, stderr = client.close()
        self.assertEqual(code, 0, stderr)
        self.assertEqual(stderr.count(INSTALLED), 1, stderr)

    def check_batch_meanwhile(self, named, index):
        proc = subprocess.Popen(command_prefix() + [PYSANDBOX, "batch", "-p", str(named),
                                                    "--cache-dir", str(self.store), "-"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            for job in ({"id": "pkg", "code": PROBE, "requirements": ["usespkg"]},
                        {"id": "pkg2", "code": PROBE, "requirements": ["usespkg"]}):
                proc.stdin.write(json.dumps(job).encode() + b"\n")
            proc.stdin.flush()
            self.assertTrue(index.entered.wait(60), "pip never reached the index")
            proc.stdin.write(b'{"id": "plain", "code": "print(\'meanwhile\')"}\n')
            proc.stdin.flush()
            result = validate(json.loads(proc.stdout.readline()))
            self.assertEqual((result["id"], result["stdout"]), ("plain", "meanwhile\n"), result)
            self.assertFalse(index.released.is_set())
            index.release()
            proc.stdin.close()
            results = {r["id"]: r for r in parse_lines(proc.stdout.read())}
        finally:
            index.release()
            if not proc.stdin.closed:
                proc.stdin.close()
            code = proc.wait(timeout=60)
        stderr = proc.stderr.read()
        self.assertEqual(code, 0, stderr)
        self.assert_probe(results["pkg"], "held job")
        self.assert_probe(results["pkg2"], "its twin")
        self.assertEqual(stderr.count(INSTALLED), 1, stderr)


if __name__ == "__main__":
    unittest.main()
