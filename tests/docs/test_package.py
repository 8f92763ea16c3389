"""`cpack -G DEB` in this build tree makes pysandbox_<version>_<arch>.deb, with no second build:
lintian finds no error in it, its binary is stripped and at most 15 MB, and what it installs
works from where it lands. The package is unpacked into a throwaway root (`dpkg-deb -x`), not
installed on this machine, and from there `pysandbox run`, `pysandbox doctor`, the man page and
the Python package are used as a user would use them.

Needs dpkg-dev and file (CPack runs dpkg-shlibdeps and file), lintian and binutils; without
them the test fails, naming them."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

from docs_support import BUILD, PYSANDBOX, REPO

CPACK = os.environ.get("CPACK_COMMAND", "cpack")
MAX_BINARY_BYTES = 15 * 1024 * 1024
# What CPack's DEB generator runs (file and dpkg-shlibdeps, for the dependencies), and the checks.
TOOLS = {"dpkg-deb": "dpkg", "dpkg-shlibdeps": "dpkg-dev", "file": "file", "lintian": "lintian",
         "readelf": "binutils"}

# Relative to the package's root: what a user of the package needs.
PACKAGED_FILES = [
    "usr/bin/pysandbox",
    "usr/share/pysandbox/profiles/default.toml",
    "usr/share/pysandbox/profiles/strict.toml",
    "usr/share/pysandbox/profiles/datascience.toml",
    "usr/share/man/man1/pysandbox.1.gz",
    "usr/share/man/man5/pysandbox-profile.5.gz",
    "usr/share/bash-completion/completions/pysandbox",
    "usr/share/zsh/vendor-completions/_pysandbox",
    "usr/share/fish/vendor_completions.d/pysandbox.fish",
    "usr/lib/python3/dist-packages/pysandbox/__init__.py",
    "usr/lib/python3/dist-packages/pysandbox/py.typed",
    "usr/lib/python3/dist-packages/pysandbox/dask/__init__.py",
    "usr/share/doc/pysandbox/copyright",
    "usr/share/doc/pysandbox/changelog.gz",
] + [f"usr/share/pysandbox/schema/{p.name}" for p in sorted((REPO / "schema").glob("*.json"))]
# The AppArmor profile, for the postinst to put in /etc/apparmor.d where AppArmor 4 is.
PACKAGED_FILES.append("usr/share/pysandbox/apparmor/pysandbox")


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=240,
                          **kwargs)


class PackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        missing = sorted({pkg for tool, pkg in TOOLS.items() if not shutil.which(tool)})
        if missing:
            raise AssertionError(f"the package test needs {', '.join(TOOLS)}: "
                                 f"apt-get install {' '.join(missing)}")
        cls.work = Path(tempfile.mkdtemp(prefix="pysandbox-deb-"))
        cls.work.chmod(0o755)
        cpack = run(CPACK, "-G", "DEB", "--config", BUILD / "CPackConfig.cmake",
                    "-B", cls.work / "out", cwd=BUILD)
        if cpack.returncode != 0:
            raise AssertionError(f"cpack failed:\n{cpack.stdout}{cpack.stderr}")
        debs = sorted((cls.work / "out").glob("*.deb"))
        if len(debs) != 1:
            raise AssertionError(f"cpack made {debs}, not one .deb:\n{cpack.stdout}")
        cls.deb = debs[0]
        cls.root = cls.work / "root"
        subprocess.run(["dpkg-deb", "-x", cls.deb, cls.root], check=True)
        subprocess.run(["dpkg-deb", "-e", cls.deb, cls.work / "control"], check=True)
        cls.root.chmod(0o755)
        cls.binary = cls.root / "usr/bin/pysandbox"
        # No user profiles and no built binary on PATH: what is found must be the package's.
        cls.env = {"PATH": f"{cls.root / 'usr/bin'}:/usr/bin:/bin",
                   "HOME": str(cls.work / "home"), "XDG_CONFIG_HOME": str(cls.work / "config")}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def field(self, name: str) -> str:
        return run("dpkg-deb", "-f", self.deb, name).stdout.strip()

    def test_the_file_is_named_as_debian_names_packages(self):
        version = run(PYSANDBOX, "--version").stdout.split()[-1]
        arch = run("dpkg", "--print-architecture").stdout.strip()
        self.assertEqual(self.deb.name, f"pysandbox_{version}_{arch}.deb")
        self.assertEqual((self.field("Package"), self.field("Version"),
                          self.field("Architecture")), ("pysandbox", version, arch))

    def test_it_depends_on_the_interpreter_the_profiles_run(self):
        self.assertIn("python3", re.split(r"[,\s]+", self.field("Depends")))
        for name in ("Maintainer", "Section", "Priority", "Description"):
            self.assertTrue(self.field(name), name)

    def test_everything_a_user_needs_is_in_it(self):
        missing = [f for f in PACKAGED_FILES if not (self.root / f).is_file()]
        self.assertEqual(missing, [])
        # The seccomp programs and the bytecode the build prepared, as `cmake --install` has them.
        for folder, pattern in (("seccomp", "*.bpf"), ("python", "*.pyc")):
            built = sorted(p.name for p in (BUILD / "share/pysandbox" / folder).glob(pattern))
            packaged = sorted(p.name for p in
                              (self.root / "usr/share/pysandbox" / folder).glob(pattern))
            self.assertEqual(packaged, built, folder)
            self.assertTrue(built, f"the build prepared no {folder}/{pattern}")
        self.assertEqual(list(self.root.glob("usr/lib/python3/dist-packages/**/__pycache__")), [])

    def test_files_under_etc_are_conffiles(self):
        etc = sorted("/" + str(p.relative_to(self.root)) for p in self.root.glob("etc/**/*")
                     if p.is_file())
        conffiles = self.work / "control/conffiles"
        listed = conffiles.read_text().split() if conffiles.exists() else []
        self.assertEqual(listed, etc)

    def test_the_apparmor_profile_attaches_to_the_packaged_binary_and_stays_out_of_etc(self):
        # Debian 12's AppArmor 3 cannot parse it: the postinst decides, on the machine.
        text = (self.root / "usr/share/pysandbox/apparmor/pysandbox").read_text()
        self.assertIn("profile pysandbox /usr/{bin/pysandbox,libexec/pysandbox-kernel} "
                      "flags=(unconfined) {", text)
        self.assertFalse((self.root / "etc/apparmor.d/pysandbox").exists())

    def test_the_binary_is_stripped_and_small(self):
        size = self.binary.stat().st_size
        self.assertLessEqual(size, MAX_BINARY_BYTES, f"{size} bytes")
        sections = run("readelf", "-S", "-W", self.binary).stdout
        self.assertNotIn(".symtab", sections)
        self.assertNotIn(".debug_info", sections)

    def test_lintian_finds_no_error(self):
        proc = run("lintian", "--fail-on", "error", "--tag-display-limit", "0", self.deb)
        errors = [line for line in proc.stdout.splitlines() if line.startswith("E:")]
        self.assertEqual((proc.returncode, errors), (0, []), proc.stdout + proc.stderr)

    def test_maintainer_scripts_do_nothing_without_apparmor(self):
        for script in ("postinst", "prerm", "postrm"):
            path = self.work / "control" / script
            self.assertEqual(path.stat().st_mode & 0o777, 0o755, script)
            # No apparmor_parser on PATH: nothing to load, and the install goes on.
            proc = run("/bin/sh", path, "configure" if script == "postinst" else "remove",
                       env={"PATH": str(self.work / "no-such-dir")})
            self.assertEqual((proc.returncode, proc.stdout, proc.stderr), (0, "", ""), script)

    def test_the_installed_binary_runs_hello_with_the_packaged_profile(self):
        proc = run("pysandbox", "run", "-v", REPO / "examples/hello.py", env=self.env,
                   cwd=self.work)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("Hello from the sandbox!", proc.stdout)
        self.assertIn(str(self.root / "usr/share/pysandbox/profiles/default.toml"), proc.stderr)

    def test_the_installed_doctor_passes(self):
        proc = run("pysandbox", "doctor", env=self.env, cwd=self.work)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)

    def test_the_installed_man_page_renders(self):
        proc = run("man", "-l", self.root / "usr/share/man/man1/pysandbox.1.gz",
                   env={**self.env, "MANPAGER": "cat", "MANWIDTH": "80"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("pysandbox run", proc.stdout)

    def test_the_python_package_runs_the_installed_binary(self):
        # Debian's python3 with the package's dist-packages, as /usr/lib/python3/dist-packages is
        # on its path once installed; the binary is found on PATH, as installed.
        code = ("import pysandbox, pysandbox.dask\n"
                "print(pysandbox.__file__)\n"
                "print(pysandbox.run('print(6 * 7)').stdout, end='')\n")
        dist = self.root / "usr/lib/python3/dist-packages"
        proc = run("/usr/bin/python3", "-c", code, cwd=self.work,
                   env={**self.env, "PYTHONPATH": str(dist), "PYTHONDONTWRITEBYTECODE": "1"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        location, answer = proc.stdout.splitlines()
        self.assertEqual((location, answer), (str(dist / "pysandbox/__init__.py"), "42"))


if __name__ == "__main__":
    unittest.main()
