#!/usr/bin/python3
"""A job or a call does not wait for ever for its sandbox to start. A profile's
[python] preload (or a package environment's module imported as one) may hang; the sandbox then
never says it is ready, and a batch job or an MCP call handed that sandbox used to wait for it
for ever, its timeout counting only from the cell's dispatch. It now waits at most its timeout or
10 s, whichever is longer.

Judged from the host: the front answers within a bound well under the hang (a result whose
status is "sandbox_error", saying the sandbox was not ready), and no process of the hanging sandbox is
left (the preload module's name is the run's marker: it is on every such command line).
"""
from __future__ import annotations

import json
import subprocess
import threading
import time
import unittest

from harness import (PYSANDBOX, SandboxTestCase, command_prefix, jobs_file, preload_marker,
                     preload_module_profile, wait_for_no_leftovers)
from test_mcp_session_ends import Server

HANG = "import time\ntime.sleep(3600)\n"
NOT_READY = "was not ready after"
# A job waits 10 s at most for its sandbox's start (its timeout, 2 s, is shorter), with room for
# a loaded host: the old behaviour never answers at all.
ANSWERED_WITHIN = 40


def hanging_profile(marker: str) -> str:
    return str(preload_module_profile(marker, HANG, extra='[limits]\nwall_time = "2s"'))


class StartDeadlineTest(SandboxTestCase):
    def assert_gone(self, marker: str) -> None:
        self.assertEqual(wait_for_no_leftovers(marker, 10.0), [],
                         "a sandbox whose start hung outlived its job")

    def test_a_batch_job_whose_sandbox_never_starts_times_out(self):
        marker = preload_marker()
        hanging = hanging_profile(marker)
        jobs = jobs_file([{"id": "first", "code": "print(1)"},
                          {"id": "second", "code": "print(2)"}])
        started = time.monotonic()
        try:
            done = subprocess.run(
                command_prefix() + [PYSANDBOX, "batch", "-q", "-j", "2", "-p", hanging,
                                    str(jobs)],
                capture_output=True, timeout=ANSWERED_WITHIN)
        except subprocess.TimeoutExpired:
            self.fail(f"batch did not answer within {ANSWERED_WITHIN} s: its jobs waited for "
                      "sandboxes that never started")
        elapsed = time.monotonic() - started
        results = [json.loads(line) for line in done.stdout.splitlines()]
        self.assertEqual(sorted(r["id"] for r in results), ["first", "second"], done.stderr)
        for result in results:
            self.assertEqual(result["status"], "sandbox_error", result)
            self.assertIn(NOT_READY, result["message"])
            self.assertEqual(result["stdout"], "", "the cell ran in a sandbox that never started")
        self.assertLess(elapsed, ANSWERED_WITHIN)
        self.assert_gone(marker)

    def test_an_mcp_call_whose_sandbox_never_starts_times_out(self):
        marker = preload_marker()
        hanging = hanging_profile(marker)
        server = Server("--pool", "1", "-p", hanging, marker=preload_marker())
        self.addCleanup(server.close)
        call = server.tool("run_python", code="print(1)", profile=hanging)
        started = time.monotonic()
        answered: list[dict] = []

        def read() -> None:
            answered.append(server.answer(call))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(ANSWERED_WITHIN)
        self.assertTrue(answered, f"the call had no answer within {ANSWERED_WITHIN} s: it "
                        "waited for a sandbox that never started")
        self.assertLess(time.monotonic() - started, ANSWERED_WITHIN)
        text = json.dumps(answered[0])
        self.assertIn("sandbox_error", text)
        self.assertIn(NOT_READY, text)
        server.close()  # its pool keeps starting sandboxes of that profile while it serves
        self.assert_gone(marker)


if __name__ == "__main__":
    unittest.main()
