"""Load: 500 sandboxes, 8 at a time, mixing scripts that succeed, raise, time out, exhaust
memory and flood their output. Every result must be right, nothing may be left behind
(processes, mounts, temp entries, the caller's fds), and pysandbox's own peak RSS must stay flat.

PYSANDBOX_LOAD_RUNS changes the number of runs (default 500).

Peak RSS is read from /proc/PID/status (VmHWM) of the pysandbox process itself, sampled every
few milliseconds while it runs; the last sample is at most one interval before it exits.
os.wait4's ru_maxrss would be simpler but is not pysandbox's: it is the maximum over the waited
process and every descendant it reaped, which here is the sandboxed python (reaped by init,
which pysandbox reaps) -- the memory script's 64 MiB, not the supervisor's footprint.
"""

import os
import re
import subprocess
import sys
import time
import unittest
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from harness import (PYSANDBOX, Result, SandboxTestCase, command_prefix,  # noqa: E402
                     script, wait_for_no_leftovers)
from test_faults import HostState  # noqa: E402

RUNS = int(os.environ.get("PYSANDBOX_LOAD_RUNS", "500"))
PARALLEL = 8
SAMPLE_INTERVAL = 0.005
OUTPUT_LIMIT = 64 << 10
FLOOD_LINE = b"y" * 99 + b"\n"
FLOOD_LINES = 20_000  # 2 MB, far over the limit
# Per-run growth that would show a leak: with 100 runs of a kind, anything above noise.
RSS_GROWTH_SLACK_KIB = 1024
# pysandbox's own peak (about 3 MiB here): its buffers are bounded whatever the script prints.
# Under ASan the shadow memory and quarantine make the number meaningless; only flatness counts.
RSS_BOUND_KIB = None if os.environ.get("PYSANDBOX_SANITIZED") else 16 << 10


class Outcome(NamedTuple):
    kind: str
    returncode: int
    stdout: bytes
    stderr: bytes
    peak_rss_kib: int
    status: str | None = None  # from the JSON result, for the runs made with --json


class Kind(NamedTuple):
    name: str
    body: str
    options: tuple[str, ...]
    check: Callable[["LoadTest", Outcome, int], None]


def status_of(outcome: Outcome) -> str:
    """The run's status: the JSON result's, or (for the runs in human mode) what the exit code
    and the output say."""
    if outcome.status is not None:
        return outcome.status
    if outcome.returncode == 0:
        return "output_limit" if b"bytes omitted" in outcome.stdout else "ok"
    if outcome.returncode == 124:
        return "timeout"
    if outcome.returncode == 128 + 9 or b"MemoryError" in outcome.stderr:
        return "memory_limit"
    if outcome.returncode == 1 and b"Traceback" in outcome.stderr:
        return "exception"
    return f"unexpected exit {outcome.returncode}"


def check_ok(test, outcome, i):
    test.assertEqual(outcome.stdout, f"ok {i}\n".encode())


def check_exception(test, outcome, i):
    test.assertEqual(outcome.returncode, 1)
    test.assertIn(f"ValueError: boom {i}".encode(), outcome.stderr)


def check_timeout(test, outcome, i):
    test.assertEqual(outcome.returncode, 124)
    # The limit counts the interpreter's start too: on a loaded host it can strike before.
    test.assertIn(outcome.stdout, (b"", b"started\n"))


def check_memory(test, outcome, i):
    test.assertIn(outcome.returncode, (1, 128 + 9))


def check_flood(test, outcome, i):
    test.assertEqual(outcome.returncode, 0)
    marker = re.search(rb"\n\[\.\.\. (\d+) bytes omitted \.\.\.\]\n", outcome.stdout)
    test.assertIsNotNone(marker, outcome.stdout[-200:])
    kept = len(outcome.stdout) - len(marker.group(0))
    test.assertEqual(int(marker.group(1)) + kept, len(FLOOD_LINE) * FLOOD_LINES)
    test.assertLessEqual(kept, OUTPUT_LIMIT)
    test.assertTrue(outcome.stdout.startswith(FLOOD_LINE))
    test.assertTrue(outcome.stdout.endswith(FLOOD_LINE))


KINDS = [
    Kind("ok", "import sys\nprint('ok', sys.argv[1])\n", (), check_ok),
    Kind("exception", "import sys\nraise ValueError('boom ' + sys.argv[1])\n", (),
         check_exception),
    Kind("timeout", "import time\nprint('started', flush=True)\ntime.sleep(60)\n",
         ("--timeout", "300ms"), check_timeout),
    Kind("memory", "blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))\n",
         ("--memory", "64MiB"), check_memory),
    Kind("output_limit",
         f"import sys\nfor _ in range({FLOOD_LINES}):\n    sys.stdout.write({FLOOD_LINE.decode()!r})\n",
         ("--output-limit", "64KiB"), check_flood),
]
EXPECTED_STATUS = {"ok": {"ok"}, "exception": {"exception"}, "timeout": {"timeout"},
                   "memory": {"memory_limit"}, "output_limit": {"output_limit"}}


def vm_hwm_kib(pid: int, binary: str) -> int | None:
    """VmHWM of pid while it is the pysandbox binary (not yet the forked test runner or
    setpriv before their exec); None otherwise."""
    try:
        if os.path.realpath(f"/proc/{pid}/exe") != binary:
            return None
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def run_sampled(args: list[str], binary: str) -> tuple[int, bytes, bytes, int]:
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    peak = 0
    deadline = time.monotonic() + 60
    while True:
        if (hwm := vm_hwm_kib(proc.pid, binary)) is not None:
            peak = max(peak, hwm)
        try:
            stdout, stderr = proc.communicate(timeout=SAMPLE_INTERVAL)
            return proc.returncode, stdout, stderr, peak
        except subprocess.TimeoutExpired:
            if time.monotonic() > deadline:
                proc.kill()
                stdout, stderr = proc.communicate()
                return -1, stdout, stderr + b"\n[load test: no exit within 60 s]", peak


def open_fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


class LoadTest(SandboxTestCase):
    def test_500_mixed_sandboxes_8_at_a_time(self):
        scripts = {kind.name: script(kind.body) for kind in KINDS}
        binary = os.path.realpath(PYSANDBOX)
        host = HostState()
        fds_before = open_fd_count()

        def one(i: int) -> Outcome:
            # Every other run of each kind asks for the JSON result, whose output fields must
            # then pass the same checks as the pass-through output.
            kind = KINDS[i % len(KINDS)]
            as_json = (i // len(KINDS)) % 2 == 1
            args = command_prefix() + [PYSANDBOX, "run", *(["--json"] if as_json else []),
                                       *kind.options, str(scripts[kind.name]),
                                       "--", str(i), self.marker]
            code, stdout, stderr, peak = run_sampled(args, binary)
            if not as_json:
                return Outcome(kind.name, code, stdout, stderr, peak)
            result = Result(code, stdout, stderr, 0.0).json()  # checked against the schema
            return Outcome(kind.name, code, result["stdout"].encode(), result["stderr"].encode(),
                           peak, result["status"])

        start = time.monotonic()
        with ThreadPoolExecutor(PARALLEL) as pool:
            outcomes = list(pool.map(one, range(RUNS)))
        elapsed = time.monotonic() - start

        for i, outcome in enumerate(outcomes):
            with self.subTest(run=i, kind=outcome.kind):
                detail = f"exit {outcome.returncode}, stderr {outcome.stderr[-500:]!r}"
                self.assertIn(status_of(outcome), EXPECTED_STATUS[outcome.kind], detail)
                KINDS[i % len(KINDS)].check(self, outcome, i)

        self.assertEqual(wait_for_no_leftovers(self.marker, grace=2.0), [])
        self.assertEqual(host.new_mounts(), set())
        self.assertEqual(host.new_temp_entries(), set())
        self.assertEqual(open_fd_count(), fds_before)
        self.assertPeakRssFlat(outcomes)
        print(f"\n  {RUNS} runs in {elapsed:.1f} s; pysandbox VmHWM KiB by kind: "
              f"{self.rss_summary(outcomes)}", flush=True)

    def assertPeakRssFlat(self, outcomes: list[Outcome]):
        for kind in KINDS:
            peaks = [o.peak_rss_kib for o in outcomes if o.kind == kind.name and o.peak_rss_kib]
            self.assertGreater(len(peaks), 0, f"no RSS sample of a {kind.name} run")
            fifth = max(1, len(peaks) // 5)
            first, last = max(peaks[:fifth]), max(peaks[-fifth:])
            if RSS_BOUND_KIB is not None:
                self.assertLessEqual(max(peaks), RSS_BOUND_KIB, f"{kind.name}: peak RSS")
            self.assertLessEqual(last, first + RSS_GROWTH_SLACK_KIB,
                                 f"{kind.name}: pysandbox's peak RSS grew from {first} to "
                                 f"{last} KiB over the runs")

    @staticmethod
    def rss_summary(outcomes: list[Outcome]) -> dict[str, tuple[int, int]]:
        summary = {}
        for kind in KINDS:
            peaks = [o.peak_rss_kib for o in outcomes if o.kind == kind.name and o.peak_rss_kib]
            summary[kind.name] = (min(peaks, default=0), max(peaks, default=0))
        return summary


if __name__ == "__main__":
    unittest.main()
