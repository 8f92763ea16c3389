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
import json
import os
import re
import sys
import threading
import unittest
from pathlib import Path

from harness import RUN_AS, NOBODY_UID, SandboxTestCase, run, temp_dir, write_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the support package
from support.wheels import make_wheel, simple_index  # noqa: E402

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
    """A PEP 503 index of a wheelhouse on 127.0.0.1, logging the paths it served."""

    def __init__(self, house: Path):
        root = temp_dir()
        simple_index(house, root)
        self.paths: list[str] = []
        index = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                index.paths.append(self.path)

        self.server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
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

    def test_run_says_what_inline_metadata_asks_for(self):
        script = write_file(temp_dir() / "needs.py",
                            "# /// script\n# dependencies = [\"tinypkg\"]\n# ///\nprint('ran')\n")
        r = run(["run", "--json", str(script)])
        obj = r.json()
        self.assertEqual(obj["stdout"], "ran\n", r.describe())
        self.assertTrue(any("env create --script" in w for w in obj["warnings"]), obj["warnings"])
        env_id = self.create("--find-links", str(self.house), "--script", str(script))
        r = run(["run", "--json", "--with-env", env_id, "--cache-dir", str(self.store),
                 str(script)])
        self.assertEqual(r.json()["warnings"], [], r.describe())

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
        ]
        for args, message in cases:
            with self.subTest(args=args):
                r = self.env("create", *args)
                self.assertEqual(r.returncode, 125, r.describe())
                self.assertIn(message, r.stderr)
        self.assertFalse((self.store / "envs").exists() and os.listdir(self.store / "envs"))


class FailureTest(EnvTestCase):
    def test_missing_package_is_an_install_error_naming_it(self):
        r = self.env("create", "--find-links", str(self.house), "nosuchpkg", "--json")
        self.assertEqual(r.returncode, INSTALL_ERROR, r.describe())
        obj = json.loads(r.stdout)
        self.assertEqual(obj["status"], "install_error")
        self.assertIn("nosuchpkg", obj["message"])
        self.assertIn(b"install_error", r.stderr)
        self.assertEqual(os.listdir(self.store / "envs"), [])
        self.assertEqual(os.listdir(self.store / "staging"), [], "the staging is removed")

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


if __name__ == "__main__":
    unittest.main()
