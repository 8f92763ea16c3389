"""`cmake --install` into a staging prefix gives a pysandbox that works from there, with the
profiles, JSON Schemas, man pages, completions and the Python package where distributions look
for them."""

import gzip
import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

from docs_support import BUILD, CMAKE, REPO

INSTALLED_FILES = [
    "bin/pysandbox",
    "share/pysandbox/profiles/default.toml",
    "share/pysandbox/profiles/strict.toml",
    "share/pysandbox/profiles/datascience.toml",
    "share/man/man1/pysandbox.1.gz",
    "share/man/man5/pysandbox-profile.5.gz",
    "share/bash-completion/completions/pysandbox",
    "share/zsh/vendor-completions/_pysandbox",
    "share/fish/vendor_completions.d/pysandbox.fish",
    "share/doc/pysandbox/copyright",
    "lib/python3/dist-packages/pysandbox/__init__.py",
    "lib/python3/dist-packages/pysandbox/py.typed",
    "lib/python3/dist-packages/pysandbox/dask/__main__.py",
] + [f"share/pysandbox/schema/{p.name}" for p in sorted((REPO / "schema").glob("*.json"))]


class InstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = Path(tempfile.mkdtemp(prefix="pysandbox-install-"))
        cls.root.chmod(0o755)
        cls.prefix = cls.root / "usr"
        # DESTDIR: what installs outside the prefix (the AppArmor profile in /etc) stays here too.
        subprocess.run([CMAKE, "--install", BUILD, "--prefix", "/usr"], check=True,
                       capture_output=True, env={**os.environ, "DESTDIR": str(cls.root)})
        # No user profiles: what is found must be the installed ones.
        cls.env = {"PATH": "/usr/bin:/bin", "HOME": str(cls.root / "home"),
                   "XDG_CONFIG_HOME": str(cls.root / "config")}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def installed(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.prefix / "bin" / "pysandbox", *args], capture_output=True,
                              text=True, env=self.env, cwd=self.root, timeout=60)

    def test_files_land_where_distributions_put_them(self):
        missing = [f for f in INSTALLED_FILES if not (self.prefix / f).is_file()]
        self.assertEqual(missing, [])
        self.assertTrue(os.access(self.prefix / "bin/pysandbox", os.X_OK))

    def test_the_result_schema_is_installed_as_the_man_page_says(self):
        schema = "share/pysandbox/schema/pysandbox.result.v1.json"
        self.assertEqual((self.prefix / schema).read_bytes(),
                         (REPO / "schema/pysandbox.result.v1.json").read_bytes())
        page = gzip.decompress((self.prefix / "share/man/man1/pysandbox.1.gz").read_bytes())
        self.assertIn(f"<prefix>/{schema}", page.decode())

    def test_profile_list_names_the_installed_profiles(self):
        proc = self.installed("profile", "list")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        names = {line.split("\t")[0] for line in proc.stdout.splitlines()}
        self.assertLessEqual({"default", "strict", "datascience"}, names)

    def test_hello_runs_with_the_installed_default_profile(self):
        proc = self.installed("run", "-v", REPO / "examples/hello.py")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("Hello from the sandbox!", proc.stdout)
        self.assertIn(str(self.prefix / "share/pysandbox/profiles/default.toml"), proc.stderr)

    def test_strict_is_found_among_the_installed_profiles(self):
        proc = self.installed("run", "-v", "-p", "strict", "-c", "print(6 * 7)")
        self.assertEqual((proc.returncode, proc.stdout), (0, "42\n"), proc.stderr)
        self.assertIn(str(self.prefix / "share/pysandbox/profiles/strict.toml"), proc.stderr)

    def test_the_prepared_font_list_is_installed_and_used(self):
        def lists(directory: Path) -> list[str]:
            return sorted(p.name for p in directory.glob("fontlist-v*.json"))

        built = lists(BUILD / "share/pysandbox/matplotlib")
        installed = self.prefix / "share/pysandbox/matplotlib"
        self.assertEqual(lists(installed), built)
        # No list means the build found no matplotlib for the profiles' interpreter: the test
        # would check nothing, so it fails (python3-matplotlib is a build and test dependency).
        self.assertTrue(built, f"the build prepared no matplotlib font list in "
                               f"{BUILD / 'share/pysandbox/matplotlib'}: is python3-matplotlib "
                               f"installed for the profiles' interpreter (apt-get install "
                               f"python3-matplotlib, then rebuild)?")
        # The prefix is under /tmp, which the sandbox's staging root covers: read before that.
        proc = self.installed("run", "-v", "-c",
                              "import os; print(os.listdir(os.environ['MPLCONFIGDIR']))")
        self.assertEqual((proc.returncode, proc.stdout), (0, f"{built}\n"), proc.stderr)
        self.assertIn(f"matplotlib font list: {installed / built[0]}", proc.stderr)

    def test_the_hooks_bytecode_is_installed_and_used(self):
        built = sorted(p.name for p in (BUILD / "share/pysandbox/python").glob("*.pyc"))
        installed = sorted(p.name for p in (self.prefix / "share/pysandbox/python").glob("*.pyc"))
        self.assertEqual(installed, built)
        self.assertTrue(built, "the build compiled no bytecode for the audit hook")
        # A run of the default profile uses the figure backend and sitecustomize (the audit
        # hook's), which are the same in every run (the analyzer is `check`'s, the driver a
        # session's): each comes with its bytecode.
        used = [name for name in built if name.split(".")[0] in ("pysandbox_figures",
                                                                  "sitecustomize")]
        self.assertEqual(len(used), 2, built)
        proc = self.installed("run", "-c",
                              "import os; print(sorted(os.listdir('/sandbox/.pysandbox/__pycache__')))")
        self.assertEqual((proc.returncode, proc.stdout), (0, f"{used}\n"), proc.stderr)

    def test_the_python_package_is_where_the_system_python3_finds_it(self):
        # Debian's python3 has <prefix>/lib/python3/dist-packages on its path for /usr and
        # /usr/local; here the prefix is a staging one, so PYTHONPATH stands for that.
        dist = self.prefix / "lib/python3/dist-packages"
        installed = sorted(str(p.relative_to(dist)) for p in dist.rglob("*") if p.is_file())
        shipped = sorted(str(p.relative_to(REPO / "python")) for p in
                         (REPO / "python/pysandbox").rglob("*")
                         if p.is_file() and "__pycache__" not in p.parts)
        self.assertEqual(installed, shipped)
        code = "import pysandbox; print(pysandbox.run('print(6 * 7)').stdout, end='')"
        proc = subprocess.run(
            ["/usr/bin/python3", "-c", code],
            capture_output=True, text=True, cwd=self.root, timeout=60,
            env={**self.env, "PATH": f"{self.prefix / 'bin'}:/usr/bin:/bin",
                 "PYTHONPATH": str(dist), "PYTHONDONTWRITEBYTECODE": "1"})
        self.assertEqual((proc.returncode, proc.stdout), (0, "42\n"), proc.stderr)

    def test_installed_man_page_renders(self):
        proc = subprocess.run(["man", "-l", self.prefix / "share/man/man1/pysandbox.1.gz"],
                              capture_output=True, text=True,
                              env={**self.env, "MANPAGER": "cat", "MANWIDTH": "80"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("pysandbox run", proc.stdout)


if __name__ == "__main__":
    unittest.main()
