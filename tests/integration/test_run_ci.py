"""`pysandbox run` in a Makefile or a CI step: --fail-on-truncation turns a run whose output the
output limit cut into exit status 1 (with --json too, where pysandbox_exit_code says the same),
so that `pysandbox run x.py > $@` fails rather than keep a cut file; without the flag, or when
nothing was cut, the script's own status passes through.

Judged from the host: the exit status and the bytes on stdout.
"""

import unittest

from harness import SandboxTestCase, run, script

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


if __name__ == "__main__":
    unittest.main()
