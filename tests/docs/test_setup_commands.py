"""The README's install command works as written where there is no `sudo` (a root-only machine: a
container, a CI image), and sends everything that needs root through `sudo` for a user who is not.

As root: the whole command runs, from the repository, with a `sudo` first on PATH that fails the
way a missing one does; it must install (apt-get, for real), build ./build (already built by the
suite, so this is quick) and run the example. As nobody: the command up to the build runs with a
`sudo` that records what it was asked and does nothing; each apt-get must have gone through it
(as nobody, an apt-get run directly fails on its lock).
"""

import os
import re
import shutil
import stat
import subprocess
import tempfile
import unittest
from pathlib import Path

from docs_support import REPO

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def command(marker: str) -> str:
    """The one command in the README's fenced block right after `<!-- MARKER -->`."""
    match = re.search(rf"^<!-- {marker} -->\n```sh\n(?P<body>.*?)\n```$",
                      (REPO / "README.md").read_text(), re.MULTILINE | re.DOTALL)
    assert match, f"README.md has no <!-- {marker} --> block"
    lines = match["body"].splitlines()
    assert len(lines) == 1, f"the {marker} is {len(lines)} lines, not one command"
    return lines[0]


def scratch(test: unittest.TestCase, kind: str) -> Path:
    """A directory of the test's own, named as a test helper's (tests/support/files.py), so that
    suites running alongside do not count it as a run's leftover, and removed when it ends."""
    directory = Path(tempfile.mkdtemp(prefix=f"pysandbox-setup-{kind}-"))
    test.addCleanup(shutil.rmtree, directory, ignore_errors=True)
    return directory


def shim_dir(test: unittest.TestCase, body: str) -> Path:
    """A directory holding a `sudo` that runs `body` (sh)."""
    directory = scratch(test, "sudo")
    directory.chmod(0o755)
    sudo = directory / "sudo"
    sudo.write_text("#!/bin/sh\n" + body)
    sudo.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return directory


class SetupCommandsTest(unittest.TestCase):
    def test_install_command_as_root_without_sudo(self):
        self.assertEqual(os.geteuid(), 0, "the install command's root path needs the suite as root")
        self.assertTrue((REPO / "build" / "build.ninja").is_file(),
                        "the README's install command builds ./build: configure and build it "
                        "there first, or this test would build it all again")
        missing = shim_dir(self, 'echo "sudo: command not found" >&2\nexit 127\n')
        proc = subprocess.run(
            ["bash", "-c", command("install-command")], cwd=REPO, capture_output=True, text=True,
            timeout=900, stdin=subprocess.DEVNULL,
            env={"PATH": f"{missing}:{SYSTEM_PATH}", "HOME": str(missing),
                 "DEBIAN_FRONTEND": "noninteractive", "LANG": "C.UTF-8"})
        self.assertEqual(proc.returncode, 0, f"stdout {proc.stdout[-3000:]!r}\n"
                                             f"stderr {proc.stderr[-3000:]!r}")
        self.assertNotIn("sudo", proc.stderr)
        self.assertIn("Hello from the sandbox!", proc.stdout)

    def test_install_command_through_sudo_as_a_user(self):
        up_to_build = command("install-command").split(" && cmake ", 1)[0]
        log = scratch(self, "log")
        log.chmod(0o777)
        sudo = shim_dir(self, f'echo "$*" >> {log}/asked\n')
        proc = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
             "bash", "-c", up_to_build], cwd="/", capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL, env={"PATH": f"{sudo}:{SYSTEM_PATH}", "LANG": "C.UTF-8"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        asked = (log / "asked").read_text().splitlines()
        self.assertEqual([line.split()[:2] for line in asked],
                         [["apt-get", "update"], ["apt-get", "install"]], asked)


if __name__ == "__main__":
    unittest.main()
