"""The man pages render cleanly and cover every command, option and profile key."""

import os
import re
import subprocess
import unittest

from docs_support import PYSANDBOX, REPO

PAGES = ["man/pysandbox.1", "man/pysandbox-profile.5"]


def rendered(page: str) -> str:
    proc = subprocess.run(["man", "-l", str(REPO / page)], capture_output=True, text=True,
                          env={**os.environ, "MANWIDTH": "100", "MANPAGER": "cat", "PAGER": "cat"},
                          check=True)
    return proc.stdout


def help_options(*command: str) -> set[str]:
    text = subprocess.run([PYSANDBOX, *command, "--help"], capture_output=True, text=True).stdout
    return set(re.findall(r"(?:^|[ ,])(--[a-z][-a-z]*)", text, re.MULTILINE))


class ManPageTest(unittest.TestCase):
    def test_groff_prints_no_warnings(self):
        for page in PAGES:
            with self.subTest(page=page):
                proc = subprocess.run(["groff", "-ww", "-z", "-man", str(REPO / page)],
                                      capture_output=True, text=True)
                self.assertEqual((proc.returncode, proc.stderr), (0, ""))

    def test_man_renders_every_section(self):
        page = rendered("man/pysandbox.1")
        for section in ["SYNOPSIS", "COMMANDS AND OPTIONS", "EXIT STATUS", "JSON RESULT",
                        "ENVIRONMENT", "FILES", "EXAMPLES"]:
            self.assertRegex(page, rf"(?m)^{section}$")
        profile_page = rendered("man/pysandbox-profile.5")
        for section in ["KEYS", "INHERITANCE", "LOOKUP", "SHIPPED PROFILES"]:
            self.assertRegex(profile_page, rf"(?m)^{section}$")

    def test_every_option_of_every_command_is_documented(self):
        page = rendered("man/pysandbox.1")
        for command in (["run"], ["profile", "list"], ["profile", "show"], ["doctor"], []):
            options = help_options(*command)
            missing = sorted(o for o in options if o not in page)
            self.assertEqual(missing, [], f"pysandbox {' '.join(command)}: not in the man page")
        self.assertIn("--timeout", help_options("run"))

    def test_every_profile_key_has_its_default(self):
        page = rendered("man/pysandbox-profile.5")
        self.assertIn("limits.wall_time (duration; built-in default '5s')", page)
        self.assertIn("python.interpreter (string; built-in default '/usr/bin/python3')", page)

    def test_every_exit_code_is_explained(self):
        page = rendered("man/pysandbox.1")
        for code in ["124", "125", "126, 127", "128+N", "the script's own"]:
            self.assertRegex(page, rf"(?m)^ +{re.escape(code)}\b")


if __name__ == "__main__":
    unittest.main()


def section(page: str, name: str) -> str:
    """The rendered text of one section, up to the next heading."""
    match = re.search(rf"(?ms)^{re.escape(name)}$(.*?)(?=^[A-Z][A-Z -]+$|\Z)", page)
    assert match, f"no section {name}"
    return match.group(1)


class ShippedProfilesTest(unittest.TestCase):
    def test_every_shipped_profile_is_named_in_both_pages(self):
        shipped = sorted(p.stem for p in (REPO / "profiles").glob("*.toml"))
        self.assertIn("network", shipped)
        files = " ".join(section(rendered("man/pysandbox.1"), "FILES").split())
        listed = section(rendered("man/pysandbox-profile.5"), "SHIPPED PROFILES")
        for name in shipped:
            with self.subTest(profile=name):
                self.assertRegex(files, rf"The shipped profiles \([^)]*\b{name}\b")
                self.assertRegex(listed, rf"(?m)^ {{7}}{name}(\s|$)")


class TimeoutHelpTest(unittest.TestCase):
    def timeout_line(self, command: str) -> str:
        text = subprocess.run([PYSANDBOX, command, "--help"], capture_output=True, text=True,
                              check=True).stdout
        match = re.search(r"--timeout DUR\s+(.*?)(?=\n  +-|\n\n)", text, re.DOTALL)
        self.assertIsNotNone(match, text)
        return " ".join(match.group(1).split())

    def test_only_run_exits_124_at_its_timeout(self):
        self.assertIn("(exit 124)", self.timeout_line("run"))
        for command, unit in (("session", "cell"), ("mcp", "call"), ("batch", "job")):
            with self.subTest(command=command):
                line = self.timeout_line(command)
                self.assertNotIn("124", line)
                self.assertIn(f"Longest a {unit} may run", line)
                self.assertIn("status timeout", line)
