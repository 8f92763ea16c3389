"""The wall-clock limit: exit 124, on time, and nothing left behind.

Elapsed times are measured on the host around the whole pysandbox process, so they
include setup; the limit may never fire early and may overshoot by at most SLACK.
"""

import subprocess
import unittest

from harness import TIME_SLACK_SCALE, SandboxTestCase, leftovers

SLACK = 0.3 * TIME_SLACK_SCALE  # seconds of overshoot allowed after the limit

BUSY_LOOP = """
import sys
print("ready", flush=True)
while True:
    pass
"""

FORK_THEN_LOOP = """
import os, signal, sys, time

for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(sig, signal.SIG_IGN)

def sleep_forever():
    try:
        time.sleep(120)
    finally:
        os._exit(0)

try:
    child = os.fork()
    if child == 0:                      # double fork: the grandchild is orphaned
        try:
            if os.fork() == 0:
                os.setsid()
                sleep_forever()
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    if os.fork() == 0:                  # and a plain sleeping child
        sleep_forever()
    print("forked", flush=True)
except OSError as exc:                  # a profile without processes may refuse fork
    print("fork refused:", exc, flush=True)

print("ready", flush=True)
while True:
    pass
"""


class WallClockTest(SandboxTestCase):
    def assertTimedOut(self, result, limit):
        self.assertExit(result, 124)
        self.assertGreaterEqual(result.elapsed, limit - 0.01, "limit fired early" + result.describe())
        self.assertLessEqual(result.elapsed, limit + SLACK, "limit fired late" + result.describe())

    def test_busy_loop_is_stopped_at_one_second_and_leaves_nothing(self):
        with self.running(BUSY_LOOP, options=["--timeout", "1s"]) as live:
            self.assertTrue(leftovers(self.marker), "the sandboxed process is not visible by marker")
            # Let the limit fire while our end of its stdin is still open.
            try:
                live.proc.wait(timeout=1 + SLACK + 2)
            except subprocess.TimeoutExpired:
                pass
        self.assertTimedOut(live.result, 1.0)
        self.assertEqual(leftovers(self.marker), [], "processes survived the run")

    def test_forked_and_double_forked_children_do_not_survive(self):
        result = self.run_script(FORK_THEN_LOOP, options=["--timeout", "1s"], timeout=8)
        self.assertEqual(leftovers(self.marker), [], "processes survived the run")
        if b"ready" in result.stdout:
            # fork worked or failed with an exception; either way the script then loops
            self.assertTimedOut(result, 1.0)
        else:
            # the only other acceptable outcome: the policy killed the script at fork
            self.assertGreater(result.returncode, 128, result.describe())

    def test_quarter_second_precision(self):
        result = self.run_script(BUSY_LOOP, options=["--timeout", "250ms"])
        self.assertTimedOut(result, 0.25)
        self.assertEqual(leftovers(self.marker), [])

    def test_ignoring_sigterm_does_not_help(self):
        body = "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n" \
               "    signal.signal(s, signal.SIG_IGN)\n" + BUSY_LOOP
        result = self.run_script(body, options=["--timeout", "1s"])
        self.assertTimedOut(result, 1.0)
        self.assertEqual(leftovers(self.marker), [])

    def test_closing_stdout_and_stderr_does_not_end_the_run(self):
        body = "import os\nos.close(1)\nos.close(2)\nwhile True:\n    pass\n"
        result = self.run_script(body, options=["--timeout", "1s"])
        self.assertTimedOut(result, 1.0)
        self.assertEqual(leftovers(self.marker), [])

    def test_output_before_the_limit_is_kept_and_the_limit_is_reported(self):
        result = self.run_script(BUSY_LOOP, options=["--timeout", "500ms"])
        self.assertTimedOut(result, 0.5)
        self.assertEqual(result.stdout, b"ready\n")
        self.assertRegex(result.stderr.decode(errors="replace").lower(), r"time|wall",
                         "no message says the sandbox stopped the script")

    def test_script_finishing_before_the_limit_is_unaffected(self):
        body = "import sys, time\ntime.sleep(0.2)\nprint('done')\nsys.exit(7)\n"
        result = self.run_script(body, options=["--timeout", "3s"])
        self.assertExit(result, 7)
        self.assertEqual(result.stdout, b"done\n")
        self.assertEqual(result.stderr, b"")
        self.assertGreaterEqual(result.elapsed, 0.2)
        self.assertLess(result.elapsed, 2.0, "pysandbox waited for the deadline" + result.describe())


if __name__ == "__main__":
    unittest.main()
