"""The AppArmor profile (packaging/apparmor/pysandbox.in, written into the build's data dir as it is
installed): it attaches to the installed binary, grants `userns` and nothing else, and
apparmor_parser accepts it (-Q -K -T: parsed only, no kernel, no cache). apparmor_parser is a test
dependency (Debian's apparmor package): without it the test fails. And the install rule: the
installed profile attaches to the binary of the prefix installed to, goes to the data dir always
and to /etc/apparmor.d only where AppArmor 4 can parse it (packaging/apparmor/CMakeLists.txt),
under DESTDIR when one is set."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

from docs_support import BUILD, CMAKE

PARSER = shutil.which("apparmor_parser",
                      path=os.environ.get("PATH", "") + os.pathsep + "/usr/sbin:/sbin")
PROFILE = BUILD / "share/pysandbox/apparmor/pysandbox"
# AppArmor 4's policy ABI, which the `userns` rule needs; Debian 12 has AppArmor 3.0.
ABI_4 = Path("/etc/apparmor.d/abi/4.0")
ABI_4_ONLY = ["abi <abi/4.0>,", "userns,"]


def configured(name: str) -> str:
    """A variable of the build's CMakeCache.txt."""
    match = re.search(rf"^{name}:\w+=(.*)$", (BUILD / "CMakeCache.txt").read_text(), re.M)
    assert match, f"{name} is not in {BUILD / 'CMakeCache.txt'}"
    return match.group(1)


def rules(text: str) -> list[str]:
    """The profile's lines, without comments and blank lines."""
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def parse(text: str) -> subprocess.CompletedProcess:
    assert PARSER, ("apparmor_parser not found: install Debian's apparmor package "
                    "(a test dependency)")
    with tempfile.NamedTemporaryFile("w", prefix="pysandbox-apparmor-") as profile:
        profile.write(text)
        profile.flush()
        return subprocess.run([PARSER, "-Q", "-K", "-T", profile.name], capture_output=True,
                              text=True, timeout=60)


class AppArmorProfileTest(unittest.TestCase):
    def test_it_grants_userns_to_the_installed_binary_only(self):
        prefix = Path(configured("CMAKE_INSTALL_PREFIX"))
        binaries = f"{prefix}/{{bin/pysandbox,libexec/pysandbox-kernel}}"
        self.assertEqual(rules(PROFILE.read_text()), [
            "abi <abi/4.0>,",
            "include <tunables/global>",
            f"profile pysandbox {binaries} flags=(unconfined) {{",
            "userns,",
            "include if exists <local/pysandbox>",
            "}",
        ])

    def test_apparmor_parser_accepts_it(self):
        text = PROFILE.read_text()
        if ABI_4.exists():
            proc = parse(text)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            return
        # AppArmor 3 (Debian 12): it refuses the profile for its ABI, which is why the install
        # rule leaves /etc/apparmor.d alone here (one profile that fails to parse fails every
        # profile's load at boot), and parses the rest: attachment, flags, includes.
        refused = parse(text)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("abi/4.0", refused.stderr)
        rest = "\n".join(line for line in text.splitlines() if line.strip() not in ABI_4_ONLY)
        proc = parse(rest)
        self.assertEqual(proc.returncode, 0, proc.stderr)


class InstallRuleTest(unittest.TestCase):
    def install(self, root: Path) -> list[str]:
        """`cmake --install --component apparmor --prefix /usr` into DESTDIR=root: the files it
        wrote."""
        subprocess.run([CMAKE, "--install", BUILD, "--component", "apparmor", "--prefix", "/usr"],
                       check=True, capture_output=True, env={**os.environ, "DESTDIR": str(root)})
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())

    def test_the_data_dir_always_and_etc_only_where_apparmor_4_is(self):
        shared = "usr/share/pysandbox/apparmor/pysandbox"
        etc = "etc/apparmor.d/pysandbox"
        with tempfile.TemporaryDirectory() as root:
            self.assertEqual(self.install(Path(root)), [shared])
            # Attached to the binary of the prefix installed to, not the one configured.
            self.assertIn("profile pysandbox /usr/{bin/pysandbox,libexec/pysandbox-kernel} "
                          "flags=(unconfined) {",
                          (Path(root) / shared).read_text())
        with tempfile.TemporaryDirectory() as root:
            abi = Path(root) / "etc/apparmor.d/abi/4.0"
            abi.parent.mkdir(parents=True)
            abi.write_text("")
            self.assertEqual(self.install(Path(root)),
                             ["etc/apparmor.d/abi/4.0", etc, shared])
            self.assertEqual((Path(root) / etc).read_text(), (Path(root) / shared).read_text())


if __name__ == "__main__":
    unittest.main()
