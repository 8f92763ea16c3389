"""`pysandbox run` in a Makefile or a CI step: --fail-on-truncation turns a run whose output the
output limit cut into exit status 1 (with --json too, where pysandbox_exit_code says the same),
so that `pysandbox run x.py > $@` fails rather than keep a cut file; without the flag, or when
nothing was cut, the script's own status passes through. --output-runs DIR reuses one directory
for many runs: each run's files go into a new DIR/run-N, never into anything that was there.

Judged from the host: the exit status, the bytes on stdout, and the files on the host.
"""

import os
import subprocess
import unittest

from harness import PYSANDBOX, SandboxTestCase, command_prefix, run, script, temp_dir, write_file

FLOOD = "import sys\nsys.stdout.write('x' * 200000)\n"


class FailOnTruncationTest(SandboxTestCase):
    def test_cut_output_fails_the_run_with_the_flag_only(self):
        flood = script(FLOOD)
        cut = run(["run", "--output-limit", "64KiB", "--fail-on-truncation", str(flood)])
        self.assertEqual(cut.returncode, 1, cut.describe())
        self.assertLess(len(cut.stdout), 200000)
        plain = run(["run", "--output-limit", "64KiB", str(flood)])
        self.assertEqual(plain.returncode, 0, plain.describe())

    def test_the_json_result_says_the_same_status(self):
        r = run(["run", "--json", "--output-limit", "64KiB", "--fail-on-truncation",
                 str(script(FLOOD))])
        self.assertEqual(r.returncode, 1, r.describe())
        result = r.json()
        self.assertEqual((result["status"], result["pysandbox_exit_code"]), ("output_limit", 1))

    def test_output_that_fits_and_the_scripts_own_status_pass_through(self):
        fits = run(["run", "--fail-on-truncation", "-c", "print('all of it')"])
        self.assertEqual((fits.returncode, fits.stdout), (0, b"all of it\n"), fits.describe())
        failed = run(["run", "--output-limit", "64KiB", "--fail-on-truncation", "-c",
                      "import sys\nsys.stdout.write('x' * 200000)\nsys.exit(3)"])
        self.assertEqual(failed.returncode, 3, failed.describe())


WRITE = "import sys\nopen('out.txt', 'w').write(sys.argv[1])\n"


class OutputRunsTest(SandboxTestCase):
    def run_into(self, runs, word: str, *options: str):
        return run(["run", "--output-runs", str(runs), *options, str(script(WRITE)), "--", word])

    def test_each_run_gets_a_new_run_directory_and_says_which(self):
        runs = temp_dir(0o777) / "runs"  # absent: made
        first = self.run_into(runs, "one")
        self.assertExit(first, 0)
        self.assertEqual(first.stderr.decode(), f"pysandbox: 1 file kept in {runs}/run-1\n")
        second = self.run_into(runs, "two", "--json")
        self.assertExit(second, 0)
        self.assertEqual(second.json()["files"][0]["host_path"], f"{runs}/run-2/out.txt")
        self.assertEqual(sorted(os.listdir(runs)), ["run-1", "run-2"])
        self.assertEqual(((runs / "run-1/out.txt").read_text(),
                          (runs / "run-2/out.txt").read_text()), ("one", "two"))

    def test_what_is_there_is_left_alone_links_included(self):
        runs = temp_dir(0o777)
        victim = temp_dir(0o777)
        write_file(runs / "notes.txt", "the caller's")
        os.mkdir(runs / "run-4")
        write_file(runs / "run-4" / "out.txt", "earlier")
        os.symlink(victim, runs / "run-5")  # a link where the next run would go
        result = self.run_into(runs, "new")
        self.assertExit(result, 0)
        self.assertEqual((runs / "run-6/out.txt").read_text(), "new", result.describe())
        self.assertFalse((runs / "run-6").is_symlink())
        self.assertEqual(os.listdir(victim), [], "a link was followed")
        self.assertEqual((runs / "run-4/out.txt").read_text(), "earlier")
        self.assertEqual((runs / "notes.txt").read_text(), "the caller's")

    def test_a_link_as_the_directory_is_refused(self):
        target = temp_dir(0o777)
        link = temp_dir(0o777) / "runs"
        os.symlink(target, link)
        result = self.run_into(link, "x")
        self.assertExit(result, 125)
        self.assertIn(f"--output-runs: {link}: a symbolic link", result.stderr.decode())
        self.assertEqual(os.listdir(target), [])

    def test_it_excludes_output_dir(self):
        result = run(["run", "--output-runs", str(temp_dir(0o777)), "--output-dir",
                      str(temp_dir(0o777)), "-c", "pass"])
        self.assertExit(result, 125)
        self.assertRegex(result.stderr.decode(),  # CLI11 names them in the order it checks
                         r"--output-(runs|dir) excludes --output-(dir|runs)")

    def test_runs_at_once_never_share_a_directory(self):
        runs = temp_dir(0o777)
        procs = [subprocess.Popen([*command_prefix(), PYSANDBOX, "run", "--output-runs", str(runs),
                                   str(script(WRITE)), "--", str(n)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for n in range(4)]
        self.assertEqual([p.wait(timeout=60) for p in procs], [0] * 4)
        self.assertEqual(sorted(os.listdir(runs)), [f"run-{n}" for n in range(1, 5)])
        written = sorted((runs / name / "out.txt").read_text() for name in os.listdir(runs))
        self.assertEqual(written, ["0", "1", "2", "3"])


if __name__ == "__main__":
    unittest.main()
