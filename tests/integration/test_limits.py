"""Limits and supervision under load: CPUs, stopped processes, 200 runs in a row, 5 GB of output.

Everything is judged from the host: /proc of the sandboxed processes, the host's mount
table, /tmp and /dev/shm listings, the test's own fds, and pysandbox's VmHWM.
"""

import os
import signal
import subprocess
import threading
import time
import tty
import unittest

from harness import (PYSANDBOX, TEST_HELPER_PREFIXES, Result, SandboxTestCase, command_prefix,
                     leftovers, marker_pids, probe_script, proc_status, run,
                     sandboxed_python_pid, script, settle, temp_dir)
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


class SchedulingTest(SandboxTestCase):
    PROBE = "import sys\nprint('ready', flush=True)\nsys.stdin.read()\n"

    def policies(self, probe) -> tuple[int, int]:
        """The supervisor's scheduling policy and the sandboxed interpreter's, read from the host
        (setpriv execs pysandbox in place: the supervisor is the started process)."""
        return os.sched_getscheduler(probe.proc.pid), os.sched_getscheduler(probe.pid)

    def test_the_supervisor_is_a_batch_task_and_the_script_keeps_the_callers_policy(self):
        # The supervisor does not preempt the script at each of its writes (run_watch.cpp); the
        # script is not made a batch task with it.
        with self.running(self.PROBE) as probe:
            self.assertEqual(self.policies(probe), (os.SCHED_BATCH, os.SCHED_OTHER))

    def test_the_supervisor_keeping_output_for_a_json_result_is_not(self):
        # Its result written at the end would wait a tick at each wake-up. The output is kept,
        # so no "ready" comes out: the interpreter blocked reading its stdin is the sign (the
        # supervisor switches, when it does, before its loop, long before an interpreter starts).
        path = probe_script(self.PROBE)
        proc = subprocess.Popen(
            command_prefix() + [PYSANDBOX, "run", "--json", "--timeout", "20s", str(path), "--",
                                self.marker],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            def waiting() -> bool:
                try:
                    pids = [pid for pid in marker_pids(self.marker, whole_arg=True)
                            if os.readlink(f"/proc/{pid}/exe").startswith("/usr/bin/python")]
                    return not (pids and proc_status(pids[0]).get("State", "").startswith("S"))
                except (OSError, KeyError):  # one of them ended meanwhile: look again
                    return True

            self.assertFalse(settle(waiting, 10), "the interpreter never blocked on its stdin")
            interpreter = sandboxed_python_pid(self.marker)
            self.assertEqual((os.sched_getscheduler(proc.pid), os.sched_getscheduler(interpreter)),
                             (os.SCHED_OTHER, os.SCHED_OTHER))
        finally:
            proc.communicate(b"", timeout=30)
        self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_a_caller_with_a_policy_of_its_own_keeps_it(self):
        # The test's own policy, inherited by what it starts (the suite runs as root, which may
        # go back to the normal policy).
        probe = self.running(self.PROBE)
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        try:
            probe.__enter__()
        finally:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        try:
            self.assertEqual(self.policies(probe), (os.SCHED_IDLE, os.SCHED_IDLE))
        finally:
            probe.__exit__(None, None, None)


# Numbered bytes, no stretch of which looks like another: a misplaced piece of the head or the
# tail shows. The script writes them in 64 KiB writes.
PASSED_SIZE = 3 << 20
PASSED_SCRIPT = ("import sys\n"
                 "data = b''.join(b'%d,' % i for i in range(600000))[:3 << 20]\n"
                 "for at in range(0, len(data), 65536):\n"
                 "    sys.stdout.buffer.write(data[at:at + 65536])\n")


def passed_data() -> bytes:
    return b"".join(b"%d," % i for i in range(600000))[:PASSED_SIZE]


class PassedThroughOutputTest(SandboxTestCase):
    """The output limit to the byte, and the head and tail unchanged, whatever the caller's stdout
    is: a pipe and a file (spliced), a file opened O_APPEND and a terminal (copied: the kernel
    refuses to splice into them), /dev/null. Judged from what reached the caller's descriptor."""

    LIMIT = 1 << 20  # a head of 512 KiB, a tail of 256 KiB

    def expected(self) -> bytes:
        data = passed_data()
        head, tail = self.LIMIT // 2, self.LIMIT // 4
        omitted = len(data) - head - tail
        return data[:head] + b"\n[... %d bytes omitted ...]\n" % omitted + data[-tail:]

    def run_into(self, stdout, limit: str = "1MiB") -> subprocess.CompletedProcess:
        path = script(PASSED_SCRIPT)
        done = subprocess.run(
            command_prefix() + [PYSANDBOX, "run", "--timeout", "60s", "--output-limit", limit,
                                str(path)],
            stdout=stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        if limit == "1MiB":
            omitted = PASSED_SIZE - self.LIMIT // 2 - self.LIMIT // 4
            self.assertIn(b"output limit of 1MiB reached; %d bytes omitted" % omitted,
                          done.stderr)
        return done

    def test_into_a_pipe(self):
        done = self.run_into(subprocess.PIPE)
        self.assertEqual(done.stdout, self.expected())

    def test_all_of_it_into_a_pipe_under_a_large_limit(self):
        done = self.run_into(subprocess.PIPE, limit="1GiB")
        self.assertEqual(done.stdout, passed_data())
        self.assertNotIn(b"output limit", done.stderr)

    def test_into_a_file_and_a_file_opened_to_append(self):
        for flags in (os.O_WRONLY, os.O_WRONLY | os.O_APPEND):
            with self.subTest(append=bool(flags & os.O_APPEND)):
                path = os.path.join(temp_dir(), "out")
                with open(path, "wb") as before:
                    before.write(b"written before\n")
                fd = os.open(path, flags)
                try:
                    if not flags & os.O_APPEND:  # at the end, as `>>` would leave it
                        os.lseek(fd, 0, os.SEEK_END)
                    self.run_into(fd)
                finally:
                    os.close(fd)
                with open(path, "rb") as out:
                    self.assertEqual(out.read(), b"written before\n" + self.expected())

    def test_into_dev_null(self):
        self.run_into(subprocess.DEVNULL)

    def test_into_a_terminal(self):
        master, terminal = os.openpty()
        received = bytearray()

        def drain():
            while True:
                try:
                    chunk = os.read(master, 1 << 16)
                except OSError:  # EIO: the terminal's last descriptor closed
                    return
                if not chunk:
                    return
                received.extend(chunk)

        try:
            tty.setraw(terminal)  # no "\r" added to each "\n"
            reader = threading.Thread(target=drain)
            reader.start()
            try:
                self.run_into(terminal)
            finally:
                os.close(terminal)
                reader.join(timeout=60)
        finally:
            os.close(master)
        self.assertEqual(bytes(received), self.expected())


if __name__ == "__main__":
    unittest.main()
