"""What a newcomer's slips get at the shell: a misspelt option, command, profile or profile key is
named with what it most likely meant, and nothing runs (an option before the command too);
durations and sizes read as people write them; no command at all prints the help. And what a run
lost is said on stderr in human mode, one line each: files not kept, the memory limit, an exit
status, the exception's hint (the same as --json's).

Judged from the host: the exit status, pysandbox's own lines on stderr, the JSON result."""

import json
import unittest

from harness import SandboxTestCase, profile, run, script, temp_dir


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

    def test_an_option_before_the_command(self):
        self.assertRefused(["--timout", "1", "run"],
                           "error: unknown option --timout; did you mean --timeout? (after the "
                           "command: pysandbox run --timeout ...)")
        self.assertRefused(["--json", "run"], "error: --json is an option of run: put it after "
                           "the command (pysandbox run --json ...)")
        result = run(["--josn"])
        self.assertExit(result, 125)
        self.assertEqual(result.stderr.decode().splitlines()[0],
                         "pysandbox: error: unknown option --josn; did you mean --json? (a "
                         "command's options go after it: pysandbox COMMAND [OPTIONS])")
        self.assertExit(run(["--version"]), 0)

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


def own_lines(result) -> list[str]:
    """pysandbox's own lines on stderr (the script's traceback passes through between them)."""
    return [line for line in result.stderr.decode().splitlines() if line.startswith("pysandbox: ")]


class WhatWasLostTest(SandboxTestCase):
    def test_files_left_in_tmp_work_and_not_kept_are_named(self):
        body = "for name in ('d.txt', 'a.png', 'c.csv', 'b.txt'):\n    open(name, 'w').write('x')\n"
        result = run(["run", str(script(body))])
        self.assertExit(result, 0)
        self.assertEqual(own_lines(result), [
            "pysandbox: 4 files left in /tmp/work were not kept (a.png, b.txt, c.csv and 1 "
            "more); add --output-dir DIR to keep them"], result.describe())
        kept = run(["run", "--output-dir", str(temp_dir(0o777) / "out"), str(script(body))])
        self.assertExit(kept, 0)
        self.assertEqual(kept.stderr, b"", "kept files are not lost")
        one = run(["run", "-c", "open('plot.png', 'w').write('x')"])
        self.assertEqual(own_lines(one), [
            "pysandbox: 1 file left in /tmp/work was not kept (plot.png); add --output-dir DIR "
            "to keep them"], one.describe())

    def test_the_memory_limit_is_said_and_is_the_results_message(self):
        body = "chunks = []\nwhile True:\n    chunks.append(b'x' * 2**20)\n"
        human = run(["run", "--memory", "64MiB", str(script(body))])
        self.assertExit(human, 1)
        self.assertEqual(own_lines(human)[-1:],
                         ["pysandbox: memory limit of 64MiB reached (MemoryError)"],
                         human.describe())
        answer = run(["run", "--json", "--memory", "64MiB", str(script(body))]).json()
        self.assertEqual((answer["status"], answer["message"]),
                         ("memory_limit", "memory limit of 64MiB reached (MemoryError)"))

    def test_an_exit_status_is_said(self):
        human = run(["run", "-c", "import sys\nsys.exit(3)"])
        self.assertExit(human, 3)
        self.assertEqual(own_lines(human), ["pysandbox: exited with status 3"], human.describe())
        answer = run(["run", "--json", "-c", "import sys\nsys.exit(3)"]).json()
        self.assertEqual((answer["status"], answer["message"]), ("error", "exited with status 3"))
        self.assertEqual(own_lines(run(["run", "-c", "1 / 0"])), [],
                         "a traceback says why by itself")

    def test_the_exceptions_hint_is_the_one_json_gives(self):
        body = "import no_such_module_here\n"
        human = run(["run", str(script(body))])
        self.assertExit(human, 1)
        hint = run(["run", "--json", str(script(body))]).json()["exception"]["hint"]
        self.assertIn("standard library", hint)
        self.assertEqual(own_lines(human), ["pysandbox: hint: " + hint], human.describe())

    def test_multiprocessing_is_pointed_to_the_profile_that_allows_it(self):
        body = "import multiprocessing\nwith multiprocessing.Pool(2) as pool:\n" \
               "    print(pool.map(abs, [-1, -2]))\n"
        human = run(["run", str(script(body))])
        self.assertExit(human, 1)
        answer = run(["run", "--json", str(script(body))]).json()
        hint = answer["exception"]["hint"]
        self.assertIn("-p datascience", hint)
        self.assertNotIn("--input", hint)
        self.assertEqual(own_lines(human), ["pysandbox: hint: " + hint], human.describe())
        allowed = run(["run", "-p", "datascience", str(script(body))], timeout=90)
        self.assertExit(allowed, 0)
        self.assertEqual(allowed.stdout, b"[1, 2]\n", "the profile the hint names allows it")


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
