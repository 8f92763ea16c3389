"""`pysandbox batch` at the command line, cloned and forked (--fork): SIGINT writes the results of
the jobs that finished and leaves nothing running; the progress line is on stderr at a terminal
only (the summary line at the end, at a terminal or not: test_batch_ci); job fields (a script, its args and stdin, a timeout as a duration string) reach the job.

Judged from the host: the batch's exit status, its stdout and stderr, and no live process
carrying the run's marker afterwards (a [python] preload module that does not exist: the
command lines of every sandbox, zygote and job carry it).
"""

import json
import os
import pty
import select
import signal
import subprocess
import unittest

from harness import (PYSANDBOX, SandboxTestCase, command_prefix, jobs_file, marked_profile,
                     preload_marker, script, wait_for_no_leftovers, result_schema)

WAIT_FOREVER = ("import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
                "signal.sigwait({signal.SIGUSR1})")
MODES = {"cloned": [], "forked": ["--fork"]}


class BatchTest(SandboxTestCase):
    def test_sigint_writes_what_finished_and_leaves_nothing_running(self):
        for mode, options in MODES.items():
            with self.subTest(mode):
                marker = preload_marker()
                marked = marked_profile(marker, extra='[limits]\nwall_time = "60s"')
                jobs = [{"id": "quick-1", "code": "print(1)"},
                        {"id": "quick-2", "code": "print(2)"},
                        *({"id": f"stuck-{n}", "code": WAIT_FOREVER} for n in range(4))]
                batch = subprocess.Popen(
                    command_prefix() + [PYSANDBOX, "batch", *options, "-j", "2", "-p",
                                        str(marked), str(jobs_file(jobs))],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                try:
                    seen = [json.loads(batch.stdout.readline()) for _ in range(2)]
                    # Both quick jobs are done; the stuck ones hold both slots: interrupt.
                    batch.send_signal(signal.SIGINT)
                    rest, err = batch.communicate(timeout=30)
                finally:
                    if batch.poll() is None:
                        batch.kill()
                        batch.wait()
                results = seen + [json.loads(line) for line in rest.splitlines()]
                for result in results:
                    result_schema.validate(result)
                self.assertEqual(batch.returncode, 128 + signal.SIGINT, err)
                self.assertEqual({r["id"]: r["stdout"] for r in results},
                                 {"quick-1": "1\n", "quick-2": "2\n"}, err)
                self.assertEqual(wait_for_no_leftovers(marker, 5.0), [],
                                 "a sandbox outlived the interrupted batch")

    def test_progress_is_on_stderr_at_a_terminal_only_and_the_summary_ends_it(self):
        jobs = jobs_file([{"id": n, "code": "1 / 0" if n == 2 else "pass"} for n in range(4)])
        for mode, options in MODES.items():
            with self.subTest(mode):
                argv = command_prefix() + [PYSANDBOX, "batch", *options, "-j", "2", str(jobs)]
                piped = subprocess.run(argv, capture_output=True, timeout=60)
                self.assertEqual(piped.returncode, 0, piped.stderr)
                # Not a terminal: no progress, only the summary line.
                self.assertRegex(piped.stderr.decode(),
                                 r"\Apysandbox batch: 4 jobs in \d+\.\d\ds: exception 1, ok 3\n\Z")
                self.assertEqual(len(piped.stdout.splitlines()), 4)

                controller, terminal = pty.openpty()
                try:
                    batch = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=terminal)
                    os.close(terminal)
                    out, _ = batch.communicate(timeout=60)
                    shown = b""
                    while select.select([controller], [], [], 1.0)[0]:
                        try:
                            chunk = os.read(controller, 4096)
                        except OSError:  # EIO: the batch closed its end
                            break
                        if not chunk:
                            break
                        shown += chunk
                finally:
                    os.close(controller)
                self.assertEqual(batch.returncode, 0, shown)
                self.assertEqual(len(out.splitlines()), 4)
                # The last state of the one updating line (ended by a newline, which the
                # terminal shows as \r\n): every job, the failure by status; then the summary.
                lines = shown.split(b"\r\n")
                self.assertEqual(len(lines), 3, shown)
                self.assertEqual(lines[2], b"", shown)
                last = lines[0].split(b"\r")[-1]
                self.assertIn(b"pysandbox batch: 4/4 done", last, shown)
                self.assertIn(b"exception 1", last, shown)
                self.assertRegex(lines[1], rb"\Apysandbox batch: 4 jobs in [\d.]+s: "
                                           rb"exception 1, ok 3\Z", shown)

    def test_a_scripts_args_stdin_and_timeout_reach_its_job(self):
        program = script("import sys\nprint(sys.argv[1:], sys.stdin.read())\n", name="job.py")
        for mode, options in MODES.items():
            with self.subTest(mode):
                jobs = jobs_file([
                    {"id": "script", "script": str(program), "args": ["a", "b"], "stdin": "in"},
                    {"id": "late", "code": "import time\ntime.sleep(3)", "timeout": "500ms"}])
                r = subprocess.run(command_prefix() + [PYSANDBOX, "batch", *options,
                                                       "--keep-order", str(jobs)],
                                   capture_output=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                results = [json.loads(line) for line in r.stdout.splitlines()]
                for result in results:
                    result_schema.validate(result)
                self.assertEqual([(x["id"], x["status"]) for x in results],
                                 [("script", "ok"), ("late", "timeout")], results)
                self.assertEqual(results[0]["stdout"], "['a', 'b'] in\n")
                self.assertLess(results[1]["usage"]["wall_ms"], 2500)


if __name__ == "__main__":
    unittest.main()
