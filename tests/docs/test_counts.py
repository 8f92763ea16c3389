"""The system-call counts the README and the man page publish are the shipped profiles' own, as
`pysandbox profile show` computes them from the allowlist."""

import os
import re
import subprocess
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYSANDBOX = os.environ.get("PYSANDBOX", str(REPO / "build" / "bin" / "pysandbox"))


def allowed(profile: str) -> int:
    shown = subprocess.run([PYSANDBOX, "profile", "show", profile], capture_output=True,
                           text=True, check=True).stdout
    return int(re.search(r"^# seccomp allows (\d+) system calls", shown, re.M).group(1))


class CountsTest(unittest.TestCase):
    def test_readme_and_man_page_say_what_the_profiles_allow(self):
        readme = (REPO / "README.md").read_text()
        man = (REPO / "man" / "pysandbox.1.in").read_text()
        for profile in ("strict", "default", "datascience", "network"):
            count = allowed(profile)
            with self.subTest(profile=profile):
                self.assertRegex(readme, rf"`{profile}` {count}\b")
                self.assertRegex(man, rf"\.B {profile}\n{count}\b")


if __name__ == "__main__":
    unittest.main()
