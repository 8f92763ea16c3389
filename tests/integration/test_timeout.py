"""The wall-clock limit: exit 124, on time, and nothing left behind.

Elapsed times are measured on the host around the whole pysandbox process, so they
include setup; the limit may never fire early and may overshoot by at most SLACK.
"""

import os
import subprocess
import time
import unittest

from harness import (PYSANDBOX, TIME_SLACK_SCALE, Result, SandboxTestCase, command_prefix,
                     leftovers, probe_script, proc_status)

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

child = os.fork()
if child == 0:                          # double fork: the grandchild is orphaned
    try:
        if os.fork() == 0:
            os.setsid()
            sleep_forever()
    finally:
        os._exit(0)
os.waitpid(child, 0)
if os.fork() == 0:                      # and a plain sleeping child
    sleep_forever()
print("ready", flush=True)
while True:
    pass
"""


def is_sandboxed_python(pid: int) -> bool:
    """A python in a PID namespace below the host's (not the supervisor or a wrapper)."""
    try:
        return (os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("python")
                and len(proc_status(pid)["NSpid"].split()) > 1)
    except (OSError, KeyError):
        return False


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
        # datascience lets the script fork (the default profile refuses it, and then there
        # would be no child to survive). The host sees the children alive before the limit
        # strikes, and none of them after.
        path = probe_script(FORK_THEN_LOOP)
        start = time.monotonic()
        proc = subprocess.Popen(command_prefix() + [PYSANDBOX, "run", "-p", "datascience",
                                                    "--timeout", "1s", path, "--", self.marker],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            first = proc.stdout.readline()
            pythons = [pid for pid in leftovers(self.marker) if is_sandboxed_python(pid)]
            stdout, stderr = proc.communicate(timeout=8)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        result = Result(proc.returncode, first + stdout, stderr, time.monotonic() - start)
        self.assertEqual(first, b"ready\n", result.describe())
        # The script, its sleeping child and the orphaned, setsid'd grandchild.
        self.assertEqual(len(pythons), 3, f"sandboxed pythons while it ran: {pythons}")
        self.assertTimedOut(result, 1.0)
        self.assertEqual(leftovers(self.marker), [], "processes survived the run")

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
        self.assertEqual(result.stderr, b"pysandbox: exited with status 7\n",
                         "the status is said, and nothing of a limit")
        self.assertGreaterEqual(result.elapsed, 0.2)
        self.assertLess(result.elapsed, 2.0, "pysandbox waited for the deadline" + result.describe())


if __name__ == "__main__":
    unittest.main()
