"""Profiles: limits from files, flag precedence, strict validation, lookup."""

import os
import re
import tomllib
import unittest
import uuid

from harness import TIME_SLACK_SCALE, SandboxTestCase, profile, run, script, temp_dir, write_file

SLACK = 0.3 * TIME_SLACK_SCALE
LOOP = "while True:\n    pass\n"
MUST_NOT_RUN = "print('the script ran')"

ONE_SECOND = """
extends = "default"

[limits]
wall_time = "1s"
"""


class LimitsFromProfileTest(SandboxTestCase):
    def assertTimedOut(self, result, limit):
        self.assertExit(result, 124)
        self.assertGreaterEqual(result.elapsed, limit - 0.01, result.describe())
        self.assertLessEqual(result.elapsed, limit + SLACK, result.describe())

    def test_profile_wall_time_is_honored(self):
        result = self.run_script(LOOP, options=["-p", profile(ONE_SECOND)])
        self.assertTimedOut(result, 1.0)

    def test_timeout_flag_overrides_profile_in_either_order(self):
        path = str(profile(ONE_SECOND))
        for options in (["-p", path, "--timeout", "2s"], ["--timeout", "2s", "-p", path]):
            with self.subTest(options=options):
                self.assertTimedOut(self.run_script(LOOP, options=options), 2.0)

    def test_profile_that_only_extends_default_runs(self):
        result = self.run_script("print('ok')", options=["-p", profile('extends = "default"\n')])
        self.assertExit(result, 0)
        self.assertEqual(result.stdout, b"ok\n")


class ValidationTest(SandboxTestCase):
    def check_rejected(self, text, line, dotted_key):
        """The profile is refused with exit 125, naming file:line:col and the key."""
        path = profile(text)
        result = run(["run", "-p", path, script(MUST_NOT_RUN)])
        self.assertExit(result, 125)
        self.assertNotIn(b"the script ran", result.stdout)
        stderr = result.stderr.decode(errors="replace")
        self.assertRegex(stderr, re.escape(str(path)) + rf":{line}:\d+",
                         "no file:line:col in the message")
        if dotted_key:
            self.assertIn(dotted_key, stderr)

    def test_unknown_key_names_file_line_col_and_dotted_key(self):
        self.check_rejected(
            'extends = "default"\n\n[limits]\nwall_time = "1s"\nbogus_key = 3\n',
            line=5, dotted_key="limits.bogus_key")

    def test_unknown_top_level_table(self):
        self.check_rejected('extends = "default"\n[bogus_table]\nx = 1\n',
                            line=2, dotted_key="bogus_table")

    def test_bad_unit_names_the_key(self):
        self.check_rejected('extends = "default"\n\n[limits]\nmemory = "12 parsecs"\n',
                            line=4, dotted_key="limits.memory")

    def test_wrong_type_names_the_key(self):
        self.check_rejected('[limits]\nwall_time = true\n', line=2, dotted_key="limits.wall_time")

    def test_toml_syntax_error(self):
        self.check_rejected('extends = "default"\n[limits\nwall_time = "1s"\n',
                            line=2, dotted_key=None)

    def test_missing_profile_file_is_125(self):
        missing = temp_dir() / "missing.toml"
        result = run(["run", "-p", missing, script(MUST_NOT_RUN)])
        self.assertExit(result, 125)
        self.assertIn(str(missing).encode(), result.stderr)


class ProfileCommandTest(SandboxTestCase):
    def test_profile_list_includes_default(self):
        result = run(["profile", "list"])
        self.assertExit(result, 0)
        self.assertRegex(result.stdout.decode(), r"(?m)^\s*default\b")

    def test_profile_show_default_prints_toml_with_wall_time(self):
        result = run(["profile", "show", "default"])
        self.assertExit(result, 0)
        document = tomllib.loads(result.stdout.decode())  # must be valid TOML
        self.assertIn("wall_time", all_keys(document))

    def test_profile_show_unknown_is_125(self):
        result = run(["profile", "show", f"no-such-profile-{uuid.uuid4().hex}"])
        self.assertExit(result, 125)


class LookupTest(SandboxTestCase):
    def setUp(self):
        super().setUp()
        self.name = f"it_{uuid.uuid4().hex[:12]}"
        self.config_home = temp_dir()  # empty: nothing found through XDG_CONFIG_HOME
        self.env = dict(os.environ, XDG_CONFIG_HOME=str(self.config_home))

    def test_bare_name_is_not_looked_up_in_the_current_directory(self):
        cwd = temp_dir()
        write_file(cwd / f"{self.name}.toml", 'extends = "default"\n')
        probe = script("print('ran')")
        result = run(["run", "-p", self.name, probe], cwd=cwd, env=self.env)
        self.assertExit(result, 125)
        self.assertIn(self.name.encode(), result.stderr)
        # Control: the very same file works when named as a path.
        result = run(["run", "-p", f"./{self.name}.toml", probe], cwd=cwd, env=self.env)
        self.assertExit(result, 0)
        self.assertEqual(result.stdout, b"ran\n")

    def test_bare_name_is_found_in_xdg_config_home(self):
        directory = self.config_home / "pysandbox" / "profiles"
        directory.mkdir(parents=True)
        for path in (directory.parent, directory):
            os.chmod(path, 0o755)
        write_file(directory / f"{self.name}.toml", ONE_SECOND)
        result = run(["run", "-p", self.name, script(LOOP)], env=self.env)
        self.assertExit(result, 124)
        self.assertLessEqual(result.elapsed, 1.0 + SLACK)


def all_keys(document):
    """Every key at any depth of a parsed TOML document."""
    keys = set()
    for key, value in document.items():
        keys.add(key)
        if isinstance(value, dict):
            keys |= all_keys(value)
    return keys


if __name__ == "__main__":
    unittest.main()
