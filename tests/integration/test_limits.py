"""Limits and supervision under load: CPUs, stopped processes, 200 runs in a row, 5 GB of output.

Everything is judged from the host: /proc of the sandboxed processes, the host's mount
table, /tmp and /dev/shm listings, the test's own fds, and pysandbox's VmHWM.
"""

import os
import signal
import subprocess
import time
import unittest

from harness import (PYSANDBOX, TEST_HELPER_PREFIXES, Result, SandboxTestCase, command_prefix,
                     leftovers, probe_script, proc_status, run, script)
from test_faults import host_mounts


def host_state() -> dict:
    """What a run could leave on the host. Other suites may run at the same time and make their
    own scratch files, so /tmp and /dev/shm count only what is pysandbox's or the sandbox's."""
    sandbox_uids = {65534, os.geteuid()}

    def listing(path):
        names = []
        for name in os.listdir(path):
            if name.startswith(("pysandbox-unit-", *TEST_HELPER_PREFIXES)):
                continue
            try:
                owner = os.lstat(os.path.join(path, name)).st_uid
            except FileNotFoundError:
                continue
            if "pysandbox" in name or owner in sandbox_uids - {0}:
                names.append(name)
        return sorted(names)

    return {
        "mounts": host_mounts(),
        "tmp": listing("/tmp"),
        "shm": listing("/dev/shm"),
        "fds": sorted(os.listdir("/proc/self/fd")),
    }


class CpuTest(SandboxTestCase):
    def test_cpus_pins_the_script_and_sizes_thread_pools(self):
        with self.running("import sys\nprint('ready', flush=True)\nsys.stdin.read()\n",
                          options=["--cpus", "1"]) as probe:
            # One CPU, of those pysandbox may use: the one its child ran on, not always the first.
            pinned = proc_status(probe.pid)["Cpus_allowed_list"]
            self.assertRegex(pinned, r"^[0-9]+$", "exactly one CPU")
            self.assertIn(int(pinned), os.sched_getaffinity(0))
            with open(f"/proc/{probe.pid}/environ", "rb") as env:
                variables = env.read().split(b"\0")
        for pool in (b"OMP", b"OPENBLAS", b"MKL", b"NUMEXPR"):
            self.assertIn(pool + b"_NUM_THREADS=1", variables)


class StoppedProcessTest(SandboxTestCase):
    def test_a_stopped_script_still_ends_on_sigterm(self):
        body = "import os, signal\nprint('ready', flush=True)\nos.kill(os.getpid(), signal.SIGSTOP)\n"
        with self.running(body) as probe:
            deadline = time.monotonic() + 5
            while proc_status(probe.pid)["State"][0] != "T" and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertEqual(proc_status(probe.pid)["State"][0], "T")
            start = time.monotonic()
            probe.proc.send_signal(signal.SIGTERM)
            result = probe.finish()
            # Continued, it dies of SIGTERM at once, without waiting out the 2 s grace.
            self.assertLess(time.monotonic() - start, 1.5)
        self.assertEqual(result.returncode, 128 + signal.SIGTERM, result.describe())
        self.assertEqual(leftovers(self.marker), [])

    def test_stopped_children_die_with_the_sandbox(self):
        r = self.run_script(
            "import os, signal, time\n"
            "for _ in range(3):\n"
            "    if os.fork() == 0:\n"
            "        os.kill(os.getpid(), signal.SIGSTOP)\n"
            "        os._exit(0)\n"
            "time.sleep(60)\n",
            options=["-p", "datascience", "--timeout", "1s"])
        self.assertEqual(r.returncode, 124, r.describe())
        self.assertEqual(leftovers(self.marker), [])


# name -> (options, body, expected status)
MIX = {
    "ok": ([], "print('fine')", "ok"),
    "exception": ([], "raise ValueError('bad')", "exception"),
    "timeout": (["--timeout", "200ms"], "while True: pass", "timeout"),
    "memory": (["--memory", "32MiB"], "b = [b'x' * 2**20 for _ in range(64)]", "memory_limit"),
    "output": (["--output-limit", "4KiB"], "print('x' * 100000)", "output_limit"),
    "threads": (["--max-procs", "2"],
                "import threading\n"
                "ts = [threading.Thread(target=input) for _ in range(8)]\n"
                "[t.start() for t in ts]", "exception"),
    "file_size": ([], "open('big', 'wb').write(b'x' * (65 * 2**20))", "exception"),
    "tmp_full": (["--tmp-size", "1MiB"], "open('f', 'wb').write(b'x' * 2**21)", "exception"),
    "cpu": (["--cpu-time", "1s", "--timeout", "5s"], "while True: pass", "cpu_limit"),
}
# 200 runs; the slow CPU-limit case a few times only.
SCHEDULE = ["ok"] * 100 + ["exception", "timeout", "memory", "output", "threads",
                          "file_size", "tmp_full"] * 14 + ["cpu"] * 2


class ManyRunsTest(SandboxTestCase):
    def test_200_runs_leave_nothing_behind(self):
        scripts = {name: probe_script(body) for name, (_, body, _) in MIX.items()}
        before = host_state()
        for i, name in enumerate(SCHEDULE):
            options, _, expected = MIX[name]
            r = run(["run", "--json", *options, scripts[name], "--", self.marker])
            status = r.json()["status"]
            self.assertEqual(status, expected, f"run {i} ({name})" + r.describe())
            self.assertEqual(leftovers(self.marker), [], f"run {i} ({name}) left processes")
        self.assertEqual(host_state(), before)


# ASan's quarantine keeps freed memory resident (256 MiB by default) and its allocator pads every
# block, so under a sanitizer build the supervisor's VmHWM grows with what passes through it until
# the quarantine is full. There only a bound far below the bytes printed still means something.
SANITIZED = bool(os.environ.get("PYSANDBOX_SANITIZED"))
SANITIZED_BOUND_KIB = 384 * 1024


class OutputFloodTest(SandboxTestCase):
    def flood(self, gib: int, extra: list[str]):
        """pysandbox's peak RSS while a script prints `gib` GiB, and what reached stdout (a
        --json result is checked against the result schema)."""
        body = ("import sys\nchunk = b'x' * 2**20\nw = sys.stdout.buffer.write\n"
                f"for _ in range({gib} * 1024): w(chunk)\n")
        path = script(body)
        proc = subprocess.Popen(
            command_prefix() + [PYSANDBOX, "run", "--timeout", "120s", "--output-limit", "1MiB",
                                *extra, str(path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        pid = proc.pid  # setpriv execs pysandbox in place: the same pid
        received = b""
        peak_kib = 0
        os.set_blocking(proc.stdout.fileno(), False)
        while proc.poll() is None:
            try:
                data = proc.stdout.read(1 << 20)
            except BlockingIOError:
                data = None
            received += data or b""
            try:
                peak_kib = max(peak_kib, int(proc_status(pid)["VmHWM"].split()[0]))
            except (FileNotFoundError, KeyError, ProcessLookupError):
                pass
            time.sleep(0.01)
        os.set_blocking(proc.stdout.fileno(), True)
        received += proc.stdout.read()
        stderr = proc.stderr.read()
        if "--json" in extra:
            Result(proc.returncode, received, stderr, 0.0).json()
        return proc.returncode, len(received), peak_kib, stderr

    def test_printing_5_gb_keeps_the_supervisor_small(self):
        code, received, small_peak, _ = self.flood(0, [])
        self.assertEqual((code, received), (0, 0))
        code, received, peak, stderr = self.flood(5, [])
        self.assertEqual(code, 0, stderr)
        self.assertLess(received, 1 << 20, "head and tail only")
        self.assertIn(b"output limit of 1MiB reached", stderr)
        if SANITIZED:
            self.assertLess(peak, SANITIZED_BOUND_KIB, f"VmHWM {peak} KiB")
        else:
            self.assertLess(peak - small_peak, 4 * 1024, f"VmHWM {small_peak} -> {peak} KiB")

    def test_printing_1_gb_with_json_keeps_the_supervisor_small(self):
        code, received, peak, stderr = self.flood(1, ["--json"])
        self.assertEqual(code, 0, stderr)
        self.assertLess(received, 2 << 20)
        self.assertLess(peak, SANITIZED_BOUND_KIB if SANITIZED else 32 * 1024, f"VmHWM {peak} KiB")


if __name__ == "__main__":
    unittest.main()
