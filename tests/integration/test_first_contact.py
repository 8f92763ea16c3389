"""What a newcomer's slips get at the shell: a misspelt option, command, profile or profile key is
named with what it most likely meant, and nothing runs; durations and sizes read as people write
them; no command at all prints the help."""

import json
import unittest

from harness import SandboxTestCase, profile, run, script


class DidYouMeanTest(SandboxTestCase):
    def assertRefused(self, args: list[str], message: str) -> None:
        path = script("print('must not run')")
        result = run([*args, str(path)])
        self.assertExit(result, 125)
        stderr = result.stderr.decode()
        self.assertEqual(stderr.splitlines()[0], "pysandbox: " + message)
        self.assertNotIn(str(path), stderr, "the error blames only what is wrong")
        self.assertNotIn(b"must not run", result.stdout)

    def test_misspelt_option(self):
        self.assertRefused(["run", "--timout", "1s"],
                           "error: unknown option --timout; did you mean --timeout?")
        self.assertRefused(["check", "--jsno"], "error: unknown option --jsno; did you mean --json?")

    def test_misspelt_command(self):
        self.assertRefused(["rnu"], "error: unknown command rnu; did you mean run?")
        result = run(["profile", "shwo", "strict"])
        self.assertExit(result, 125)
        self.assertEqual(result.stderr.decode().splitlines()[0],
                         "pysandbox: error: unknown command profile shwo; did you mean show?")

    def test_misspelt_profile(self):
        result = run(["run", "-p", "datasci", "-c", "print('must not run')"])
        self.assertExit(result, 125)
        self.assertTrue(result.stderr.decode().rstrip().endswith('did you mean "datascience"?'),
                        result.describe())

    def test_misspelt_profile_key(self):
        path = profile('extends = "default"\n[limits]\nwal_time = "2s"\n')
        result = run(["run", "-p", str(path), "-c", "print('must not run')"])
        self.assertExit(result, 125)
        self.assertIn(f"{path}:3:1: limits.wal_time: unknown key; did you mean limits.wall_time?",
                      result.stderr.decode())
        self.assertNotIn(b"must not run", result.stdout)

    def test_no_command_prints_the_help(self):
        result = run([])
        self.assertExit(result, 0)
        self.assertIn(b"Usage: pysandbox", result.stdout)
        self.assertIn(b"run", result.stdout)
        self.assertEqual(result.stderr, b"")


class UnitsTest(SandboxTestCase):
    def limits_of(self, *options: str) -> dict:
        result = run(["run", "--json", *options, "-c", "pass"])
        self.assertExit(result, 0)
        return json.loads(result.stdout)["limits"]

    def test_a_bare_number_is_seconds_and_compound_durations_add_up(self):
        self.assertEqual(self.limits_of("--timeout", "5")["wall_time_ms"], 5000)
        self.assertEqual(self.limits_of("--timeout", "0.5")["wall_time_ms"], 500)
        self.assertEqual(self.limits_of("--timeout", "1m30s")["wall_time_ms"], 90_000)
        self.assertEqual(self.limits_of("--cpu-time", "1.5s")["cpu_time_ms"], 1500)

    def test_size_units_read_in_any_case_as_powers_of_1024(self):
        for spelling in ("64mb", "64MB", "64m", "64MiB", "64mib"):
            with self.subTest(spelling=spelling):
                self.assertEqual(self.limits_of("--memory", spelling)["memory_bytes"], 64 << 20)

    def test_a_profile_reads_the_same_grammar(self):
        path = profile('extends = "default"\n[limits]\nwall_time = "1m30s"\nmemory = "96mb"\n')
        limits = self.limits_of("-p", str(path))
        self.assertEqual((limits["wall_time_ms"], limits["memory_bytes"]), (90_000, 96 << 20))

    def test_a_bad_duration_says_what_would_do(self):
        result = run(["run", "--timeout", "1m30", "-c", "print('must not run')"])
        self.assertExit(result, 125)
        self.assertIn('--timeout: invalid duration "1m30" (a unit is needed after each number; '
                      'expected e.g. 5, 0.5, 250ms, 1.5s, 1m30s, 2h)', result.stderr.decode())


class ImplicitDefaultTest(SandboxTestCase):
    def test_a_profile_without_extends_builds_on_default(self):
        path = profile('[limits]\nwall_time = "3s"\n')
        result = run(["run", "--json", "-p", str(path), "-c", "print('ran')"])
        self.assertExit(result, 0)
        answer = json.loads(result.stdout)
        self.assertEqual((answer["stdout"], answer["limits"]["wall_time_ms"]), ("ran\n", 3000))

    def test_extends_empty_starts_from_nothing(self):
        path = profile('extends = ""\n[limits]\nwall_time = "3s"\n')
        shown = run(["profile", "show", str(path)])
        self.assertExit(shown, 0)
        self.assertIn(b"ro = []", shown.stdout)


if __name__ == "__main__":
    unittest.main()
