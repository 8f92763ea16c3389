#!/usr/bin/python3
"""A batch --fork whose zygote never becomes ready (its [python] preload exits, or hangs).

- The zygote is not restarted in a loop: one that fails at once must not be replaced at once,
  round after round, while the batch waits for its input (each one a sandbox cloned and an
  interpreter started: a core's worth of CPU for as long as the batch lives).
- A job that waited for it says how long it waited (usage.setup_ms, usage.wall_ms), as a job
  whose cloned sandbox did not start in time does (test_start_deadline).
- A job waits for its zygote's start no longer than for a cloned sandbox's: its timeout, or 10 s
  when that is shorter (the man page's batch section), not the zygote's own 60 s.

Judged from the host: the batch's CPU time and that of the children it reaped (/proc/PID/stat),
its results, and how long it took to answer.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import time
import unittest

from harness import (PYSANDBOX, SandboxTestCase, command_prefix, jobs_file, preload_marker,
                     preload_module_profile, wait_for_no_leftovers)

DIES = "import os\nos._exit(3)\n"
DIES_LATER = "import os, time\ntime.sleep(1.5)\nos._exit(3)\n"
HANGS = "import time\ntime.sleep(3600)\n"
# CPU seconds an idle batch may spend in 3 s (itself and what it reaped): starting one zygote a
# second would be far less; one restarted round after round is most of a core.
IDLE_CPU = 0.5
# A job's start wait (10 s: its timeout, 2 s, is shorter), with room for a loaded host; the
# zygote's own limit is 60 s.
ANSWERED_WITHIN = 40


def cpu_seconds(pid: int) -> float:
    """utime + stime + cutime + cstime of `pid`."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")


def batch_reading_stdin(preload: str) -> tuple[str, subprocess.Popen]:
    """A `batch --fork -j 1` reading its jobs from a pipe, its zygote's preload `preload`; and
    the marker on its sandboxes' command lines."""
    marker = preload_marker()
    failing = preload_module_profile(marker, preload)
    return marker, subprocess.Popen(
        command_prefix() + [PYSANDBOX, "batch", "--fork", "-q", "-j", "1", "-p", str(failing),
                            "-"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def end_input(batch: subprocess.Popen) -> None:
    """Ends the batch's input, so that the batch ends (killed if it does not within 30 s)."""
    try:
        batch.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        batch.kill()
        batch.communicate()


class ZygoteFailingTest(SandboxTestCase):
    def test_a_zygote_that_keeps_failing_is_not_restarted_in_a_loop(self):
        marker, batch = batch_reading_stdin(DIES)
        try:
            time.sleep(1.0)  # its first zygote has failed
            before = cpu_seconds(batch.pid)
            time.sleep(3.0)
            spent = cpu_seconds(batch.pid) - before
        finally:
            end_input(batch)
        self.assertLess(spent, IDLE_CPU,
                        f"a batch waiting for its input spent {spent:.2f} s of CPU in 3 s: its "
                        "failing zygote was restarted round after round")
        self.assertEqual(wait_for_no_leftovers(marker, 10.0), [])

    def test_a_job_that_waited_for_a_failing_zygote_says_how_long(self):
        marker = preload_marker()
        failing = preload_module_profile(marker, DIES_LATER)
        done = subprocess.run(
            command_prefix() + [PYSANDBOX, "batch", "--fork", "-q", "-j", "1", "-p",
                                str(failing), str(jobs_file([{"id": "a", "code": "print(1)"}]))],
            capture_output=True, timeout=60)
        [result] = [json.loads(line) for line in done.stdout.splitlines()]
        self.assertEqual(result["status"], "sandbox_error", result)
        self.assertGreaterEqual(result["usage"]["setup_ms"], 1000,
                                "the job waited 1.5 s for its zygote; its result says it did not")
        self.assertGreaterEqual(result["usage"]["wall_ms"], result["usage"]["setup_ms"], result)
        self.assertEqual(wait_for_no_leftovers(marker, 10.0), [])

    def test_a_job_waits_for_its_zygote_no_longer_than_for_a_cloned_sandbox(self):
        marker = preload_marker()
        hanging = preload_module_profile(marker, HANGS, extra='[limits]\nwall_time = "2s"')
        started = time.monotonic()
        try:
            done = subprocess.run(
                command_prefix() + [PYSANDBOX, "batch", "--fork", "-q", "-j", "1", "-p",
                                    str(hanging),
                                    str(jobs_file([{"id": "a", "code": "print(1)"}]))],
                capture_output=True, timeout=ANSWERED_WITHIN)
        except subprocess.TimeoutExpired:
            self.fail(f"the job had no answer within {ANSWERED_WITHIN} s: it waited for its "
                      "zygote's own limit (60 s), not its start wait (10 s)")
        self.assertLess(time.monotonic() - started, ANSWERED_WITHIN)
        [result] = [json.loads(line) for line in done.stdout.splitlines()]
        self.assertEqual(result["status"], "sandbox_error", result)
        self.assertEqual(wait_for_no_leftovers(marker, 70.0), [])

    def test_a_job_that_comes_while_the_next_zygote_waits_is_answered(self):
        # A producer that sends a job, waits for its answer, then sends the next (a Dask
        # worker's batch): the second comes while the next zygote's start waits (the backoff
        # after the first one failed) and fails at once, inside Session::run. Its answer must
        # be written then, not when more input or the input's end next wakes the loop.
        marker, batch = batch_reading_stdin(DIES)
        try:
            batch.stdin.write(b'{"id": "a", "code": "print(1)"}\n')
            batch.stdin.flush()
            first = json.loads(batch.stdout.readline())
            self.assertEqual(first["status"], "sandbox_error", first)
            batch.stdin.write(b'{"id": "b", "code": "print(2)"}\n')
            batch.stdin.flush()
            answered, _, _ = select.select([batch.stdout], [], [], 10)
            self.assertTrue(answered, "the second job had no answer within 10 s: it failed at "
                            "once (the zygote's backoff) and nothing woke the loop to write it")
        finally:
            end_input(batch)
        self.assertEqual(wait_for_no_leftovers(marker, 10.0), [])


if __name__ == "__main__":
    unittest.main()
