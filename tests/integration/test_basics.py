"""The command line, stdio plumbing and exit statuses of `pysandbox run`."""

import json
import os
import unittest

from harness import SandboxTestCase, run, script, temp_dir


class HelloTest(SandboxTestCase):
    def test_hello_world_prints_exactly(self):
        result = self.run_script('print("hello, world")')
        self.assertExit(result, 0)
        self.assertEqual(result.stdout, b"hello, world\n")
        self.assertEqual(result.stderr, b"", "pysandbox must print nothing on success")

    def test_dash_c_runs_code(self):
        result = run(["run", "-c", "import sys; print(6 * 7); print(sys.argv[1:])",
                      "--", "x", self.marker])
        self.assertExit(result, 0)
        self.assertEqual(result.stdout, f"42\n['x', '{self.marker}']\n".encode())
        self.assertEqual(result.stderr, b"")

    def test_dash_reads_program_from_stdin_and_leaves_script_stdin_empty(self):
        program = b"import sys\nprint('from stdin', repr(sys.stdin.read()))\n"
        result = run(["run", "-", "--", self.marker], input=program)
        self.assertExit(result, 0)
        self.assertEqual(result.stdout, b"from stdin ''\n")
        self.assertEqual(result.stderr, b"")

    def test_stdout_and_stderr_stay_separate(self):
        result = self.run_script("""
            import sys
            sys.stdout.write("to stdout\\n")
            sys.stderr.write("to stderr\\n")
        """)
        self.assertExit(result, 0)
        self.assertEqual(result.stdout, b"to stdout\n")
        self.assertEqual(result.stderr, b"to stderr\n")

    def test_version(self):
        result = run(["--version"])
        self.assertExit(result, 0)
        self.assertRegex(result.stdout.decode(errors="replace"), r"\d+\.\d+")


class ArgumentsTest(SandboxTestCase):
    ECHO_ARGV = """
        import json, os, sys
        # Compare bytes, not decoded text, so the locale inside cannot mask a mangling.
        sys.stdout.write(json.dumps([os.fsencode(a).hex() for a in sys.argv[1:]]))
    """

    def check_verbatim(self, args):
        result = self.run_script(self.ECHO_ARGV, *args)
        self.assertExit(result, 0)
        received = [bytes.fromhex(h) for h in json.loads(result.stdout)]
        self.assertEqual(received, [os.fsencode(a) for a in [self.marker, *args]])
        self.assertEqual(result.stderr, b"")

    def test_args_after_double_dash_arrive_verbatim(self):
        self.check_verbatim([
            "two words", "'single'", '"double"', "$HOME", "${PATH}", "`id`", "$(id)",
            "a;b|c&d>e<f", "*", "~", "back\\slash", "tab\there", "new\nline",
            "ünïcødé ☃ 日本", "",
        ])

    def test_args_that_look_like_pysandbox_flags_go_to_the_script(self):
        self.check_verbatim(["--timeout", "1ms", "-p", "strict", "-c", "x", "--", "-", "--version"])


class StdinTest(SandboxTestCase):
    CAT = """
        import shutil, sys
        shutil.copyfileobj(sys.stdin.buffer, sys.stdout.buffer)
    """

    def test_small_input_is_echoed(self):
        result = self.run_script(self.CAT, input=b"line one\nline two\n")
        self.assertExit(result, 0)
        self.assertEqual(result.stdout, b"line one\nline two\n")
        self.assertEqual(result.stderr, b"")

    def test_more_than_a_mebibyte_of_binary_input_is_echoed(self):
        data = os.urandom(1024 * 1024 + 512 * 1024)
        result = self.run_script(self.CAT, input=data)
        self.assertExit(result, 0)
        self.assertEqual(len(result.stdout), len(data))
        self.assertTrue(result.stdout == data, "echoed bytes differ from the input")
        self.assertEqual(result.stderr, b"")

    def test_empty_stdin_is_eof(self):
        result = self.run_script("import sys; print(repr(sys.stdin.read()))")
        self.assertExit(result, 0)
        self.assertEqual(result.stdout, b"''\n")

    def test_unread_input_neither_hangs_nor_kills_pysandbox(self):
        result = self.run_script("print('done')", input=os.urandom(4 * 1024 * 1024))
        self.assertExit(result, 0)
        self.assertEqual(result.stdout, b"done\n")

    def test_stdio_is_streamed_while_the_script_runs(self):
        probe = """
            import sys
            print("ready", flush=True)
            line = sys.stdin.readline()
            print("got", line.strip(), flush=True)
            sys.stdin.read()
        """
        with self.running(probe) as live:
            live.send(b"ping\n")
            live.read_until(b"got ping\n")
            self.assertIsNone(live.proc.poll(), "output arrived only after the script ended")
        self.assertExit(live.result, 0)
        self.assertEqual(live.result.stdout, b"ready\ngot ping\n")


class ExitStatusTest(SandboxTestCase):
    def test_exit_status_passes_through(self):
        cases = {
            "import sys; sys.exit(0)": 0,
            "import sys; sys.exit(3)": 3,
            "import sys; sys.exit(255)": 255,
            "import os; os._exit(42)": 42,
            "pass": 0,
        }
        for code, expected in cases.items():
            with self.subTest(code=code):
                self.assertExit(self.run_script(code), expected)

    def test_death_by_signal_is_128_plus_signal(self):
        cases = {
            "import os, signal; os.kill(os.getpid(), signal.SIGKILL)": 128 + 9,
            "import os, signal; os.kill(os.getpid(), signal.SIGTERM)": 128 + 15,
            "import os; os.abort()": 128 + 6,
        }
        for code, expected in cases.items():
            with self.subTest(code=code):
                result = self.run_script(code)
                self.assertExit(result, expected)

    def test_uncaught_exception_exits_1_with_traceback(self):
        result = self.run_script(f'raise ValueError("boom {self.marker}")')
        self.assertExit(result, 1)
        self.assertIn(b"Traceback (most recent call last):", result.stderr)
        self.assertIn(f"ValueError: boom {self.marker}".encode(), result.stderr)
        self.assertEqual(result.stdout, b"")

    def test_syntax_error_exits_1(self):
        result = self.run_script("def broken(:\n")
        self.assertExit(result, 1)
        self.assertIn(b"SyntaxError", result.stderr)


class UsageErrorTest(SandboxTestCase):
    def assertOneLine(self, stderr: bytes):
        lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
        self.assertEqual(len(lines), 1, f"expected a one-line message, got {stderr!r}")

    def test_missing_script_is_125_with_the_path(self):
        missing = temp_dir() / f"missing-{self.marker}.py"
        result = run(["run", str(missing)])
        self.assertExit(result, 125)
        self.assertIn(str(missing).encode(), result.stderr)
        self.assertOneLine(result.stderr)
        self.assertEqual(result.stdout, b"")

    def test_script_that_is_a_directory_is_125(self):
        directory = temp_dir()
        result = run(["run", str(directory)])
        self.assertExit(result, 125)
        self.assertIn(str(directory).encode(), result.stderr)

    def test_unknown_flag_is_125_and_named(self):
        path = script("print('must not run')")
        result = run(["run", "--definitely-not-a-flag", str(path)])
        self.assertExit(result, 125)
        self.assertIn(b"--definitely-not-a-flag", result.stderr)
        self.assertNotIn(b"must not run", result.stdout)

    def test_unknown_subcommand_is_125(self):
        result = run(["frobnicate"])
        self.assertExit(result, 125)
        self.assertIn(b"frobnicate", result.stderr)

    def test_bad_duration_is_125(self):
        path = script("print('must not run')")
        result = run(["run", "--timeout", "5parsecs", str(path)])
        self.assertExit(result, 125)
        self.assertIn(b"5parsecs", result.stderr)
        self.assertNotIn(b"must not run", result.stdout)

    def test_run_without_program_is_125(self):
        self.assertExit(run(["run"]), 125)


if __name__ == "__main__":
    unittest.main()
