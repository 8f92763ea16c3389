"""Package environments (`pysandbox env`): pip inside a sandbox, the result stored once under its
content hash, mounted read-only into the runs that name it (--with-env).

No index is reachable from the test machines: the wheels are built here (tests/support/wheels.py)
and served from a wheelhouse (--find-links) or from a PEP 503 index on loopback, which the
install reaches through pysandbox's proxy. Judged from the host: the IDs printed, the store's
files, what an index served.
"""

import concurrent.futures
import functools
import http.server
import io
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tarfile
import threading
import time
import unittest
from pathlib import Path

from harness import RUN_AS, NOBODY_UID, SandboxTestCase, profile, run, temp_dir, write_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the support package
from support.env import PYSANDBOX, command_prefix  # noqa: E402
from support.result_schema import parse_result  # noqa: E402
from support.wheels import make_extension_wheel, make_wheel, simple_index  # noqa: E402
from test_front_options import mcp, ndjson  # noqa: E402

INSTALL_ERROR = 123
ID = re.compile(rb"^[0-9a-f]{64}\n$")


def caller_dir() -> Path:
    """A directory the caller (root, or nobody through setpriv) may write."""
    return temp_dir(0o755, owner=NOBODY_UID if RUN_AS == "nobody" else None)


def wheelhouse() -> Path:
    house = temp_dir()
    make_wheel(house, "tinypkg", "1.0", {"tinypkg/__init__.py": "VALUE = 42\n"})
    make_wheel(house, "usespkg", "2.0",
               {"usespkg/__init__.py": "import tinypkg\nVALUE = tinypkg.VALUE + 1\n"},
               requires=("tinypkg",))
    return house


class Index:
    """A PEP 503 index of a wheelhouse on 127.0.0.1, logging the paths it served. With
    ``hold``, its first request waits until ``release()``: ``entered`` is set once pip is in the
    middle of its install."""

    def __init__(self, house: Path, hold: bool = False):
        root = temp_dir()
        simple_index(house, root)
        self.paths: list[str] = []
        self.entered = threading.Event()
        self.released = threading.Event()
        if not hold:
            self.released.set()
        index = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):
                index.entered.set()
                index.released.wait(120)
                super().do_GET()

            def log_message(self, *args):
                index.paths.append(self.path)

        self.server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"
        # A short poll_interval: close()'s shutdown() waits for the loop to look at its flag,
        # at the default every 0.5 s.
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def release(self):
        self.released.set()

    def close(self):
        self.release()
        self.server.shutdown()
        self.server.server_close()


class EnvTestCase(SandboxTestCase):
    def setUp(self):
        super().setUp()
        self.store = caller_dir()
        self.house = wheelhouse()

    def env(self, *args, timeout=120):
        return run(["env", *args[:1], "--cache-dir", str(self.store), *args[1:]],
                   timeout=timeout)

    def create(self, *args):
        r = self.env("create", *args)
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertRegex(r.stdout, ID)
        return r.stdout.decode().strip()

    def run_with(self, env_id, body):
        return self.run_script(body, options=["--with-env", env_id, "--cache-dir",
                                              str(self.store), "--json"])


class CreateAndUseTest(EnvTestCase):
    def test_wheelhouse_install_is_importable_read_only_and_reused(self):
        env_id = self.create("--find-links", str(self.house), "usespkg")
        r = self.run_with(env_id[:12], """
            import os, usespkg, tinypkg
            print(usespkg.VALUE, usespkg.__file__)
            for path in (usespkg.__file__, os.path.dirname(usespkg.__file__) + "/new.py"):
                try:
                    open(path, "a").write("changed")
                    print("wrote", path)
                except OSError as e:
                    print("refused", e.errno)
            """)
        obj = r.json()
        self.assertEqual(obj["status"], "ok", r.describe())
        lines = obj["stdout"].splitlines()
        self.assertEqual(lines[0], "43 /sandbox/.packages/usespkg/__init__.py")
        # EROFS (the mount); for root's runs the files are root's, so EACCES may come first.
        self.assertEqual(len(lines), 3, r.describe())
        for line in lines[1:]:
            self.assertIn(line, ("refused 30", "refused 13"))
        # The host's view: the environment is still what its ID says.
        r = self.env("show", env_id, "--verify")
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn(b"verified", r.stdout)
        self.assertFalse((self.store / "envs" / env_id / "site" / "usespkg" / "new.py").exists())
        # The same request again: the same ID, and pip does not run.
        r = self.env("create", "-v", "--find-links", str(self.house), "usespkg")
        self.assertEqual(r.stdout.decode().strip(), env_id, r.describe())
        self.assertIn(b"reused, pip not run", r.stderr)

    def test_requirements_file_and_inline_metadata_give_the_same_environment(self):
        by_spec = self.create("--find-links", str(self.house), "usespkg==2.0")
        requirements = write_file(temp_dir() / "requirements.txt",
                                  "# comment\nusespkg==2.0  # trailing\n\n")
        by_file = self.create("--find-links", str(self.house), "-r", str(requirements))
        script = write_file(temp_dir() / "s.py",
                            "# /// script\n# requires-python = \">=3.8\"\n"
                            "# dependencies = [\n#   \"usespkg==2.0\",\n# ]\n# ///\n"
                            "import usespkg\nprint(usespkg.VALUE)\n")
        by_script = self.create("--find-links", str(self.house), "--script", str(script))
        self.assertEqual({by_spec, by_file, by_script}, {by_spec},
                         "the same distributions are one environment")
        self.assertEqual(len(os.listdir(self.store / "envs")), 1)

    def test_index_on_loopback_through_the_proxy(self):
        index = Index(self.house)
        try:
            env_id = self.create("--index-url", index.url, "usespkg")
        finally:
            index.close()
        self.assertIn("/simple/usespkg/", index.paths)
        self.assertTrue(any(p.endswith("tinypkg-1.0-py3-none-any.whl") for p in index.paths),
                        index.paths)
        by_links = self.create("--find-links", str(self.house), "usespkg")
        self.assertEqual(env_id, by_links, "the same files from an index or a wheelhouse")

    def test_list_show_rm_and_prune(self):
        first = self.create("--find-links", str(self.house), "tinypkg")
        second = self.create("--find-links", str(self.house), "usespkg")
        r = self.env("list")
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertEqual(sorted(line.split()[0] for line in r.stdout.decode().splitlines()),
                         sorted([first[:12], second[:12]]))
        r = self.env("show", second, "--json")
        meta = json.loads(r.stdout)
        self.assertEqual(meta["distributions"], [{"name": "tinypkg", "version": "1.0"},
                                                 {"name": "usespkg", "version": "2.0"}])
        self.assertEqual(meta["requested"], ["usespkg"])
        self.assertGreater(meta["size"], 0)
        r = self.env("rm", first)
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertFalse((self.store / "envs" / first).exists())
        r = self.run_with(first, "print('never')")
        self.assertEqual(r.returncode, 125, r.describe())
        self.assertIn(b"no environment", r.stderr)
        r = self.env("prune", "--max-size", "0")
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertEqual(os.listdir(self.store / "envs"), [])

    def test_bad_input_changes_nothing(self):
        cases = [
            (["--find-links", str(self.house), "--pip-option"], b"unknown option"),
            (["--find-links", str(self.house), "-r", "/nonexistent/req.txt"], b"-r"),
            (["--find-links", str(self.house), "-r",
              str(write_file(temp_dir() / "r.txt", "--index-url http://evil/simple\n"))],
             b"not a requirement"),
            (["--index-url", "ftp://x/simple", "tinypkg"], b"--index-url"),
            (["--script", str(write_file(temp_dir() / "plain.py", "print(1)\n"))],
             b"no inline metadata"),
            # pip strips a requirement (str.strip) before it looks for an option.
            (["--find-links", str(self.house), " -r /etc/passwd"], b"not a requirement"),
            (["--find-links", str(self.house), "\t--no-index"], b"not a requirement"),
            (["--find-links", str(self.house), "\u00a0--no-index"], b"not a requirement"),
            (["--find-links", str(self.house), "-r",
              str(write_file(temp_dir() / "r.txt", "\f--index-url http://evil/simple\n"))],
             b"not a requirement"),
            (["--find-links", str(self.house), "--script",
              str(write_file(temp_dir() / "s.py",
                             '# /// script\n# dependencies = [" --no-index"]\n# ///\n'))],
             b"not a requirement"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                r = self.env("create", *args)
                self.assertEqual(r.returncode, 125, r.describe())
                self.assertIn(message, r.stderr)
        self.assertFalse((self.store / "envs").exists() and os.listdir(self.store / "envs"))


class RunWithPackagesTest(EnvTestCase):
    """`run --with`, `--requirements` and PEP 723 inline metadata, as `uv run` takes them."""

    def run_pkgs(self, *args, json_mode=True, input=None):
        return run(["run", "--cache-dir", str(self.store), "--find-links", str(self.house),
                    *(["--json"] if json_mode else []), *args], timeout=120, input=input)

    def test_with_builds_once_says_so_then_reuses(self):
        code = "import usespkg; print(usespkg.VALUE, usespkg.__file__)"
        used = "43 /sandbox/.packages/usespkg/__init__.py\n"
        # The caller's stdin is the script's: the install's sandbox before it takes none of it.
        first = self.run_pkgs("--with", "usespkg", "-c",
                              code + "; import sys; print(sys.stdin.read(), end='')",
                              input=b"owed to the script\n")
        self.assertEqual(first.json()["stdout"], used + "owed to the script\n", first.describe())
        self.assertIn(b"installing usespkg", first.stderr)
        again = self.run_pkgs("--with", "usespkg", "-c", code)
        self.assertEqual(again.json()["stdout"], used, again.describe())
        self.assertNotIn(b"installing", again.stderr, "the second run reuses the environment")
        self.assertEqual(len(os.listdir(self.store / "envs")), 1)
        requirements = write_file(temp_dir() / "requirements.txt", "usespkg\n")
        by_file = self.run_pkgs("--requirements", str(requirements), "-c", code)
        self.assertEqual(by_file.json()["stdout"], used, by_file.describe())
        self.assertEqual(len(os.listdir(self.store / "envs")), 1, "the same packages, one "
                         "environment")

    def test_inline_metadata_is_honoured_and_joins_with(self):
        script = write_file(temp_dir() / "needs.py",
                            "# /// script\n# dependencies = [\"tinypkg\"]\n# ///\n"
                            "import tinypkg\nprint(tinypkg.VALUE)\n")
        first = self.run_pkgs(str(script), json_mode=False)
        self.assertEqual((first.returncode, first.stdout), (0, b"42\n"), first.describe())
        self.assertIn(b"installing tinypkg", first.stderr)
        again = self.run_pkgs(str(script), json_mode=False)
        self.assertEqual((again.returncode, again.stdout), (0, b"42\n"), again.describe())
        self.assertNotIn(b"installing", again.stderr)
        both = self.run_pkgs("--with", "usespkg", str(script), json_mode=False)
        self.assertEqual(both.returncode, 0, both.describe())
        self.assertIn(b"installing tinypkg, usespkg", both.stderr)
        # --with-env names the environment: the metadata is not installed again.
        env_id = self.create("--find-links", str(self.house), "usespkg")
        named = self.run_pkgs("--with-env", env_id, str(script), json_mode=False)
        self.assertEqual(named.stdout, b"42\n", named.describe())
        self.assertNotIn(b"installing", named.stderr)

    def test_a_profiles_requirements_are_installed_by_run_and_refused_elsewhere(self):
        named = profile(f'extends = "default"\n[python]\nrequirements = ["tinypkg"]\n'
                        f'find_links = ["{self.house}"]\n')
        code = "import tinypkg; print(tinypkg.VALUE)"
        first = run(["run", "-p", str(named), "--cache-dir", str(self.store), "-c", code],
                    timeout=120)
        self.assertEqual((first.returncode, first.stdout), (0, b"42\n"), first.describe())
        self.assertIn(b"installing tinypkg", first.stderr)
        # A front that does not install them says so rather than run without them.
        refused = run(["check", "-p", str(named), str(write_file(temp_dir() / "s.py", "1\n"))])
        self.assertEqual(refused.returncode, 125, refused.describe())
        self.assertIn(b"python.requirements", refused.stderr)
        bad = profile('extends = "default"\n[python]\nrequirements = ["--pre"]\n')
        r = run(["run", "-p", str(bad), "-c", "1"])
        self.assertEqual(r.returncode, 125, r.describe())
        self.assertIn(b"python.requirements", r.stderr)

    def test_requires_python_is_checked_by_the_sandboxs_interpreter_before_any_install(self):
        def script(requires):
            return str(write_file(temp_dir() / "s.py",
                                  f'# /// script\n# requires-python = "{requires}"\n'
                                  '# dependencies = ["tinypkg"]\n# ///\nprint("ran")\n'))

        for requires, message in ((">=3.99", b'requires-python ">=3.99" is not satisfied by '
                                             b"the sandbox's interpreter"),
                                  ("banana", b'requires-python "banana" is not a version '
                                             b"specifier")):
            with self.subTest(requires=requires):
                r = self.run_pkgs(script(requires), json_mode=False)
                self.assertEqual(r.returncode, 125, r.describe())
                self.assertIn(b"s.py:2: the `# /// script` block: " + message, r.stderr)
                self.assertNotIn(b"ran", r.stdout)
                self.assertNotIn(b"installing", r.stderr)
                r = self.env("create", "--find-links", str(self.house), "--script",
                             script(requires))
                self.assertEqual(r.returncode, 125, r.describe())
                self.assertIn(message, r.stderr)
        self.assertFalse((self.store / "envs").exists() and os.listdir(self.store / "envs"),
                         "nothing was installed")
        r = self.run_pkgs(script(">=3"), json_mode=False)
        self.assertEqual((r.returncode, r.stdout), (0, b"ran\n"), r.describe())

    def test_bad_package_requests_are_usage_errors(self):
        def script(text):
            return str(write_file(temp_dir() / "s.py", text))

        cases = [
            (["--with", "x", "--with-env", "0" * 64, "-c", "1"], b"--with-env"),
            ([script("# /// script\n# dependencies = [\nprint(1)\n")], b"s.py:1: the `# /// "
             b"script` block (PEP 723) has no closing"),
            ([script("# /// script\n# dependencies = \"x\"\n# ///\n")],
             b"s.py:2: the `# /// script` block: dependencies must be an array"),
            ([script("# /// script\n# ///\nimport os\n# /// script\n# ///\n")],
             b"s.py:4: a second"),
            (["--with=--index-url=http://evil/", "-c", "1"], b"not a requirement"),
            (["--requirements", "/nonexistent/r.txt", "-c", "1"], b"--requirements"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                r = self.run_pkgs(*args, json_mode=False)
                self.assertEqual(r.returncode, 125, r.describe())
                self.assertIn(message, r.stderr)
        # check reads the metadata as run does.
        r = run(["check", script("# /// script\n# dependencies = [\nprint(1)\n")])
        self.assertEqual(r.returncode, 125, r.describe())
        self.assertIn(b"has no closing", r.stderr)
        self.assertFalse((self.store / "envs").exists() and os.listdir(self.store / "envs"))


class FrontsTest(EnvTestCase):
    """session, batch (cloned and --fork) and mcp install a profile's python.requirements once,
    before they serve, and mount the environment read-only into every sandbox they start; a
    zygote has it on sys.path before it forks (the profile preloads the package). --with-env
    names one instead. Judged from the host: the results, the store's directories, a verify."""

    PROBE = ("import os, sys\n"
             "print('preloaded' if 'usespkg' in sys.modules else 'not preloaded')\n"
             "import usespkg\n"
             "print(usespkg.VALUE, usespkg.__file__)\n"
             "for path in (usespkg.__file__, os.path.dirname(usespkg.__file__) + '/new.py'):\n"
             "    try:\n"
             "        open(path, 'a').write('changed')\n"
             "        print('wrote', path)\n"
             "    except OSError as e:\n"
             "        print('refused', e.errno)\n")

    def named(self, requirements='["usespkg"]') -> Path:
        return profile(f'extends = "default"\n[python]\nrequirements = {requirements}\n'
                       f'find_links = ["{self.house}"]\npreload = ["usespkg"]\n')

    def assert_probe(self, result: dict, front: str):
        self.assertEqual(result["status"], "ok", (front, result))
        lines = result["stdout"].splitlines()
        self.assertEqual(lines[:2], ["preloaded", "43 /sandbox/.packages/usespkg/__init__.py"],
                         (front, result))
        # EROFS (the mount); for root's runs the files are root's, so EACCES may come first.
        self.assertEqual(len(lines), 4, (front, result))
        for line in lines[2:]:
            self.assertIn(line, ("refused 30", "refused 13"), (front, result))

    def assert_store_intact(self):
        envs = os.listdir(self.store / "envs")
        self.assertEqual(len(envs), 1, "one environment, made once for every front")
        r = self.env("show", envs[0], "--verify")
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertFalse((self.store / "envs" / envs[0] / "site" / "usespkg" / "new.py").exists())
        return envs[0]

    def test_a_profiles_requirements_reach_every_front_read_only(self):
        named = self.named()
        cache = ["--cache-dir", str(self.store)]
        request = {"id": 1, "code": self.PROBE}
        self.assert_probe(ndjson(["session", "--ndjson", "-p", str(named), *cache], [request])[0],
                          "session")
        self.assertEqual(len(os.listdir(self.store / "envs")), 1)
        for fork in ([], ["--fork"]):
            result = ndjson(["batch", *fork, "-p", str(named), *cache, "-"], [request])[0]
            self.assert_probe(result, f"batch {fork}")
        self.assert_probe(mcp(["-p", str(named), *cache], [("run_python", {"code": self.PROBE})])[0],
                          "mcp")
        self.assert_store_intact()

    def test_with_env_reaches_batch_and_sessions_in_place_of_the_profile(self):
        env_id = self.create("--find-links", str(self.house), "usespkg")
        # The profile names a package that does not exist: --with-env replaces it, so no
        # install runs (it would fail).
        named = self.named('["nosuchpkg"]')
        cache = ["--with-env", env_id[:12], "--cache-dir", str(self.store)]
        request = {"id": 1, "code": self.PROBE}
        self.assert_probe(ndjson(["batch", "--fork", "-p", str(named), *cache, "-"],
                                 [request])[0], "batch --fork")
        self.assert_probe(mcp(["-p", str(named), *cache],
                              [("start_session", {}), ("run_python", {"code": self.PROBE})])[0],
                          "mcp session")
        self.assertEqual(self.assert_store_intact(), env_id)

    def test_an_install_that_fails_stops_the_front_before_it_serves(self):
        named = self.named('["nosuchpkg"]')
        r = run(["session", "--ndjson", "-p", str(named), "--cache-dir", str(self.store)],
                input=b'{"id": 1, "code": "print(\'never\')"}\n', timeout=120)
        self.assertEqual(r.returncode, INSTALL_ERROR, r.describe())
        self.assertIn(b"install_error", r.stderr)
        self.assertIn(b"nosuchpkg", r.stderr)
        self.assertNotIn(b"never", r.stdout)
        self.assertEqual(os.listdir(self.store / "envs"), [])
        # The MCP server says it to the model at every call, and ends as session does.
        answer = mcp_answer({"code": "print('never')"},
                            ["-p", str(named), "--cache-dir", str(self.store)], INSTALL_ERROR)
        self.assertTrue(answer.get("isError"), answer)
        self.assertIn("install_error", answer["content"][0]["text"])
        self.assertIn("nosuchpkg", answer["content"][0]["text"])
        self.assertEqual(os.listdir(self.store / "envs"), [])

    def test_requirements_per_session_cell_are_refused_saying_where_they_go(self):
        # A batch job and an MCP call may ask for packages (test_env_requests.py); a session's
        # cell cannot: its one sandbox has its packages from the start.
        request = {"id": 1, "code": "print('never')", "requirements": ["tinypkg"]}
        result = ndjson(["session", "--ndjson"], [request])[0]
        self.assertEqual(result["status"], "bad_request", result)
        self.assertIn("python.requirements", result["message"])
        self.assertIn("--with-env", result["message"])


def mcp_answer(arguments: dict, options=(), exit_code=0) -> dict:
    """The result of one run_python call with `arguments` to a fresh `pysandbox mcp OPTIONS`,
    under the protocol version whose argument errors are tool errors the model reads
    (2025-11-25); the server must end with `exit_code` when its input does."""
    messages = [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
                 "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": {"name": "test", "version": "1"}}},
                {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                 "params": {"name": "run_python", "arguments": arguments}}]
    r = run(["mcp", "--pool", "0", *options],
            input="".join(json.dumps(m) + "\n" for m in messages).encode(), timeout=120)
    assert r.returncode == exit_code, r.describe()
    answers = {a.get("id"): a for a in map(json.loads, r.stdout.splitlines())}
    return answers[1]["result"]


CADD_C = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
static PyObject *add(PyObject *self, PyObject *args) {
    long a, b;
    if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
    return PyLong_FromLong(a + b);
}
static PyMethodDef methods[] = {{"add", add, METH_VARARGS, "a + b"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cadd", NULL, -1, methods};
PyMODINIT_FUNC PyInit_cadd(void) { return PyModule_Create(&module); }
"""


class CompiledExtensionTest(EnvTestCase):
    def test_a_c_extension_from_the_store_loads_inside(self):
        """A wheel with a compiled module (built here from the tests' own C) installed into an
        environment: its .so is mapped executable from the read-only store under the sandbox's
        seccomp filter, Landlock and mounts, and runs."""
        wheel = make_extension_wheel(self.house, "cadd", "1.0", CADD_C)
        self.assertRegex(wheel.name, r"^cadd-1\.0-cp3\d+-cp3\d+-linux_\w+\.whl$")
        r = run(["run", "--json", "--cache-dir", str(self.store), "--find-links",
                 str(self.house), "--with", "cadd", "-c",
                 "import cadd; print(cadd.add(2, 3), cadd.__file__)"], timeout=120)
        obj = r.json()
        self.assertEqual(obj["status"], "ok", r.describe())
        value, path = obj["stdout"].split()
        self.assertEqual(value, "5")
        self.assertRegex(path, r"^/sandbox/\.packages/cadd\.cpython-3\d+-[\w-]+\.so$")
        env_id = os.listdir(self.store / "envs")[0]
        r = self.env("show", env_id, "--verify")
        self.assertEqual(r.returncode, 0, r.describe())


class FailureTest(EnvTestCase):
    def check_install_error(self, r, package):
        """The documented install_error: exit 123, one pysandbox.result/v1 object (checked
        against the schema) naming the package, with the tail of pip's output."""
        self.assertEqual(r.returncode, INSTALL_ERROR, r.describe())
        obj = parse_result(r.stdout)
        self.assertEqual(obj["status"], "install_error")
        self.assertEqual(obj["pysandbox_exit_code"], INSTALL_ERROR)
        self.assertIn(package, obj["message"])
        self.assertIn(package, obj["install"]["output_tail"])
        self.assertIn("ERROR", obj["install"]["output_tail"])
        self.assertIn(package, obj["install"]["requested"])
        self.assertIn(b"install_error", r.stderr)
        self.assertEqual(os.listdir(self.store / "envs"), [])
        self.assertEqual(os.listdir(self.store / "staging"), [], "the staging is removed")

    def test_missing_package_is_an_install_error_naming_it(self):
        r = self.env("create", "--find-links", str(self.house), "nosuchpkg", "--json")
        self.check_install_error(r, "nosuchpkg")

    def test_a_run_whose_install_fails_gives_the_same_result(self):
        r = run(["run", "--json", "--cache-dir", str(self.store), "--find-links",
                 str(self.house), "--with", "nosuchpkg", "-c", "print('never')"], timeout=120)
        self.check_install_error(r, "nosuchpkg")
        self.assertNotIn(b"never", r.stdout)

    def test_no_network_without_an_index(self):
        # No --index-url: pip is told no index and the sandbox has no network at all, so a
        # requirement given as a URL cannot be fetched.
        index = Index(self.house)
        try:
            r = self.env("create", "--find-links", str(self.house),
                         f"tinypkg @ {index.url}/tinypkg/tinypkg-1.0-py3-none-any.whl")
        finally:
            index.close()
        self.assertEqual(r.returncode, INSTALL_ERROR, r.describe())
        self.assertEqual(index.paths, [], "the index was reached without being allowed")


class StagingTest(EnvTestCase):
    """The build's staging directory, judged from the host while pip runs (held at the index's
    first request) and after the build was killed there."""

    def test_staging_is_the_callers_alone_and_a_killed_build_leaves_nothing_used(self):
        index = Index(self.house, hold=True)
        self.addCleanup(index.close)
        create = ["env", "create", "--cache-dir", str(self.store), "-v", "--index-url",
                  index.url, "usespkg"]
        proc = subprocess.Popen(command_prefix() + [PYSANDBOX, *create],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(proc.kill)
        self.assertTrue(index.entered.wait(60), "pip never reached the index")
        staging = self.store / "staging"
        builds = os.listdir(staging)
        self.assertEqual(len(builds), 1, builds)
        self.assertRegex(builds[0], r"^build-[0-9a-f]{32}$", "a name of 128 random bits")
        caller = NOBODY_UID if RUN_AS == "nobody" else 0
        entries = [staging] + [Path(d) / n for d, dirs, files in os.walk(staging)
                               for n in dirs + files]
        for path in entries:
            st = os.lstat(path)
            self.assertEqual(st.st_uid, caller, f"{path} is not the caller's while pip runs")
            self.assertFalse(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH), f"{path} is writable "
                             "by others")
            self.assertFalse(stat.S_ISLNK(st.st_mode), path)
        if RUN_AS != "nobody":
            # A host process of the sandbox's uid that knows every name plants nothing.
            dirs = [str(p) for p in entries if p.is_dir()]
            plant = subprocess.run(
                ["setpriv", f"--reuid={NOBODY_UID}", f"--regid={NOBODY_UID}",
                 "--clear-groups", "--", sys.executable, "-c",
                 "import os, sys\nfor d in sys.argv[1:]:\n try:\n"
                 "  os.close(os.open(d + '/planted', os.O_CREAT | os.O_WRONLY, 0o644))\n"
                 "  print(d)\n except OSError:\n  pass\n", *dirs],
                capture_output=True, timeout=30)
            self.assertEqual(plant.stdout, b"", "uid 65534 could create files in the staging")
        # Killed halfway: nothing of it is an environment, or the answer to a request.
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        index.release()
        self.assertEqual(os.listdir(staging), builds, "the killed build's staging is left")
        self.assertEqual(os.listdir(self.store / "envs"), [])
        self.assertEqual(os.listdir(self.store / "requests"), [])
        r = self.env("create", "-v", "--index-url", index.url, "usespkg")
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn(b"pysandbox: created", r.stderr, "built again, not taken from the leftover")
        self.assertEqual(os.listdir(staging), [], "the leftover is removed by the next create")
        verified = self.env("show", r.stdout.decode().strip(), "--verify")
        self.assertEqual(verified.returncode, 0, verified.describe())


class StoreTrustTest(EnvTestCase):
    """A store another user could write, or a link in its place, is refused before pysandbox
    makes, changes, removes or runs anything of it: judged by what is left in the directories a
    link pointed to and by what was refused."""

    OTHER_UID = 12345  # neither the caller nor root

    def assert_refused(self, r, message):
        self.assertEqual(r.returncode, 125, r.describe())
        self.assertIn(message, r.stderr)
        self.assertIn(b"use a directory only you can write", r.stderr)

    def victim(self):
        victim = caller_dir()
        os.chmod(victim, 0o700)
        write_file(victim / "keep", "x")
        return victim

    def assert_untouched(self, victim):
        self.assertEqual(sorted(os.listdir(victim)), ["keep"])
        self.assertEqual(stat.S_IMODE(os.lstat(victim).st_mode), 0o700)

    def test_links_in_place_of_the_store_or_its_directories(self):
        victim = self.victim()
        with self.subTest(name="the store"):
            link = self.store / "store"
            os.symlink(victim, link)
            r = run(["env", "create", "--cache-dir", str(link), "--find-links",
                     str(self.house), "tinypkg"], timeout=60)
            self.assert_refused(r, b"is a symbolic link")
            self.assert_untouched(victim)
        for name in ("staging", "envs", "requests", "locks"):
            with self.subTest(name=name):
                victim = self.victim()
                store = caller_dir()
                for sub in ("staging", "envs", "requests", "locks"):
                    if sub != name:
                        os.mkdir(store / sub, 0o755)
                        os.chown(store / sub, os.stat(store).st_uid, -1)
                os.symlink(victim, store / name)
                r = run(["env", "create", "--cache-dir", str(store), "--find-links",
                         str(self.house), "tinypkg"], timeout=60)
                self.assert_untouched(victim)  # the harm, judged first
                self.assert_refused(r, b"is a symbolic link")

    def test_a_store_others_can_write_is_neither_built_in_nor_reused(self):
        for mode, message in ((0o777, b"writable by every user"), (0o775, b"writable by its group")):
            with self.subTest(mode=oct(mode)):
                store = caller_dir()
                os.chmod(store, mode)
                r = run(["env", "create", "--cache-dir", str(store), "--find-links",
                         str(self.house), "tinypkg"], timeout=60)
                self.assert_refused(r, message)
                self.assertEqual(os.listdir(store), [], "nothing made in it")
        env_id = self.create("--find-links", str(self.house), "tinypkg")
        os.chmod(self.store / "requests", 0o777)
        r = self.env("create", "--find-links", str(self.house), "tinypkg")
        self.assert_refused(r, b"requests is writable by every user")
        os.chmod(self.store / "requests", 0o755)
        # An environment another user owns (could have changed) runs nowhere.
        env = self.store / "envs" / env_id
        os.chown(env, self.OTHER_UID, -1)
        r = self.env("create", "--find-links", str(self.house), "tinypkg")
        self.assert_refused(r, f"belongs to uid {self.OTHER_UID}".encode())
        r = run(["run", "--with-env", env_id, "--cache-dir", str(self.store), "-c", "print(1)"],
                timeout=60)
        self.assert_refused(r, f"belongs to uid {self.OTHER_UID}".encode())
        self.assertNotIn(b"1\n", r.stdout)


class SparseBuildTest(EnvTestCase):
    SETUP_PY = ("import os\nfrom setuptools import setup\n"
                "os.makedirs('/tmp/work/site', exist_ok=True)\n"
                "for i in range(64):\n"
                "    with open('/tmp/work/site/sparse-%02d.bin' % i, 'wb') as f:\n"
                "        f.truncate(64 << 20)\n"
                "setup(name='sparsepkg', version='1.0', py_modules=['sparsepkg'])\n")

    def test_a_sparse_file_beyond_max_size_is_refused_before_it_is_read(self):
        """An sdist's build makes 64 files of 64 MiB each (no file may be larger than --max-size)
        that take no space (--max-size counts blocks): 4 GiB for the host to read and hash. The
        file that would take the reading past --max-size is refused unread."""
        house = temp_dir()
        files = {"setup.py": self.SETUP_PY, "sparsepkg.py": "VALUE = 1\n",
                 "PKG-INFO": "Metadata-Version: 2.1\nName: sparsepkg\nVersion: 1.0\n"}
        with tarfile.open(house / "sparsepkg-1.0.tar.gz", "w:gz") as tar:
            for name, text in files.items():
                info = tarfile.TarInfo("sparsepkg-1.0/" + name)
                info.size, info.mode = len(text.encode()), 0o644
                tar.addfile(info, io.BytesIO(text.encode()))
        os.chmod(house / "sparsepkg-1.0.tar.gz", 0o644)
        start = time.monotonic()
        r = self.env("create", "--find-links", str(house), "--allow-build", "--max-size", "64M",
                     "sparsepkg", timeout=60)
        elapsed = time.monotonic() - start
        self.assertEqual(r.returncode, 125, r.describe())
        self.assertIn(b"sparse-01.bin: 64MiB to read (a sparse file counts whole) is more than "
                      b"--max-size 64MiB leaves", r.stderr)
        self.assertEqual(os.listdir(self.store / "envs"), [], "nothing published")
        self.assertLess(elapsed, 30, "the build's tree was read")


class ConcurrencyTest(EnvTestCase):
    def test_concurrent_creates_build_once(self):
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(
                lambda _: self.env("create", "-v", "--find-links", str(self.house), "usespkg"),
                range(4)))
        ids = {r.stdout for r in results}
        self.assertEqual(len(ids), 1, [r.describe() for r in results])
        built = [r for r in results if b"pysandbox: created" in r.stderr]
        self.assertEqual(len(built), 1, [r.describe() for r in results])
        self.assertEqual(len(os.listdir(self.store / "envs")), 1)

    def test_eight_runs_asking_for_the_same_new_environment_build_it_once(self):
        """The issue's case: eight `run --with` of a script at once, on an empty store. One of
        them builds (says so on stderr) while the others wait for it; all eight import the
        package from the one environment; no staging is left."""
        script = write_file(temp_dir() / "uses.py",
                            "import usespkg\nprint(usespkg.VALUE, usespkg.__file__)\n")
        command = ["run", "--cache-dir", str(self.store), "--find-links", str(self.house),
                   "--with", "usespkg", str(script)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda _: run(command, timeout=120), range(8)))
        for r in results:
            self.assertEqual((r.returncode, r.stdout),
                             (0, b"43 /sandbox/.packages/usespkg/__init__.py\n"), r.describe())
        built = [r for r in results if b"installing usespkg" in r.stderr]
        self.assertEqual(len(built), 1, [r.describe() for r in results])
        envs = os.listdir(self.store / "envs")
        self.assertEqual(len(envs), 1, envs)
        self.assertEqual(len(os.listdir(self.store / "requests")), 1)
        self.assertEqual(os.listdir(self.store / "staging"), [], "a build's staging is left")
        r = self.env("show", envs[0], "--verify")
        self.assertEqual(r.returncode, 0, r.describe())


if __name__ == "__main__":
    unittest.main()
