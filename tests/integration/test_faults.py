"""Faults: pysandbox killed at any moment, closed pipes, a full /tmp, a missing interpreter, and
bad inputs (directories, FIFOs, unreadable and enormous files, non-UTF-8 bytes).

Every bad input gets one clear line on stderr and a documented exit code, never a crash, a hang
or a partial run; every fault leaves nothing behind on the host, judged from /proc.
"""

import errno
import os
import random
import subprocess
import time
import unittest

from harness import (PYSANDBOX, RUN_AS, TEST_HELPER_PREFIXES, SandboxTestCase, command_prefix,
                     expected_host_uid, leftovers, parse_report, profile, run, script, temp_dir,
                     wait_for_no_leftovers)

SLEEPER = "import sys, time\nprint('ready', flush=True)\ntime.sleep(60)\n"

# What a run could leave in /tmp or /dev/shm: anything owned by the sandbox's host uid (the
# script's files, or pysandbox's own when the caller is nobody), and anything named like
# pysandbox's. The host is shared with other test suites and tools, so the rest is not counted,
# nor are the test helpers' own directories (harness.TEST_HELPER_PREFIXES).
TEMP_DIRS = ("/tmp", "/dev/shm")


def could_be_the_runs(path: str) -> bool:
    name = os.path.basename(path)
    if name.startswith(TEST_HELPER_PREFIXES):
        return False
    try:
        owner = os.lstat(path).st_uid
    except OSError:
        return False  # gone already
    return owner == expected_host_uid() or name.startswith("pysandbox")


def temp_entries() -> set[str]:
    entries = set()
    for directory in TEMP_DIRS:
        for name in os.listdir(directory):
            if could_be_the_runs(path := f"{directory}/{name}"):
                entries.add(path)
    return entries


def host_mounts() -> set[str]:
    """The host's mounts (without their ids), but for the test helpers' own: the attack suite
    mounts its fixtures in pysandbox-attack-* directories while other tests run."""
    mounts = set()
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split(" - ")[0].split(maxsplit=2)[2]  # device, root, mount point, ...
            point = fields.split()[2]
            if not any(part.startswith(TEST_HELPER_PREFIXES) for part in point.split("/")):
                mounts.add(fields)
    return mounts


class HostState:
    """What a run could leave on the host: mounts and temp entries (processes: by marker)."""

    def __init__(self):
        self.mounts = host_mounts()
        self.temp = temp_entries()

    def new_mounts(self) -> set[str]:
        """Mounts made since, and still there (one that went away is another test's)."""
        return host_mounts() - self.mounts

    def new_temp_entries(self, grace: float = 1.0) -> set[str]:
        deadline = time.monotonic() + grace
        while (new := temp_entries() - self.temp) and time.monotonic() < deadline:
            time.sleep(0.05)
        return new


class FaultTestCase(SandboxTestCase):
    def setUp(self):
        super().setUp()
        self.host = HostState()

    def assertNothingLeft(self, context: str = ""):
        self.assertEqual(wait_for_no_leftovers(self.marker, grace=1.0), [],
                         f"a process of the run survived {context}")
        self.assertEqual(self.host.new_mounts(), set(), f"a mount was left {context}")
        self.assertEqual(self.host.new_temp_entries(), set(), f"a temp entry was left {context}")

    def assertOneLineError(self, result, code: int = 125, says: bytes = b""):
        self.assertExit(result, code)
        self.assertIn(says, result.stderr)
        lines = [line for line in result.stderr.decode(errors="replace").splitlines() if line]
        self.assertEqual(len(lines), 1, f"expected one line on stderr{result.describe()}")
        self.assertTrue(lines[0].startswith("pysandbox: "), result.describe())
        self.assertEqual(result.stdout, b"", "nothing of the script may have run")

    def command(self, *args) -> list[str]:
        return command_prefix() + [PYSANDBOX, *map(str, args)]


class SigkillTest(FaultTestCase):
    """SIGKILL to pysandbox in each phase: setup, the script running, artifacts being copied."""

    KILLS = 40
    MAX_DELAY = 0.015

    def kill_after(self, probe, delay: float) -> str:
        """Starts a verbose run, SIGKILLs pysandbox after `delay`; says which phase it hit."""
        proc = subprocess.Popen(self.command("run", "-v", "--timeout", "30s", probe, "--",
                                             self.marker),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        time.sleep(delay)
        proc.kill()
        stdout, stderr = proc.communicate(timeout=10)
        return phase_of(stdout, stderr)

    def test_sigkill_at_random_moments_of_setup_leaves_nothing(self):
        probe = script(SLEEPER)
        phases: dict[str, int] = {}
        rng = random.Random(8)
        for i in range(self.KILLS):
            delay = rng.uniform(0, self.MAX_DELAY)
            phase = self.kill_after(probe, delay)
            phases[phase] = phases.get(phase, 0) + 1
            self.assertNothingLeft(f"a SIGKILL {delay * 1000:.1f} ms into the run ({phase})")
        print(f"\n  SIGKILL phases over {self.KILLS} runs: {phases}", flush=True)

    def test_sigkill_while_running_leaves_nothing(self):
        probe = script(SLEEPER)
        proc = subprocess.Popen(self.command("run", "--timeout", "30s", probe, "--", self.marker),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        self.assertEqual(proc.stdout.readline(), b"ready\n")
        self.assertNotEqual(leftovers(self.marker), [])
        proc.kill()
        proc.communicate(timeout=10)
        self.assertNothingLeft("a SIGKILL while the script ran")

    def test_sigkill_while_copying_artifacts_leaves_no_partial_file(self):
        out = temp_dir(mode=0o777)  # the unprivileged caller copies into it too
        probe = script("""
            for n in range(4):  # 240 MiB: under the file size and artifact caps, slow to copy
                with open(f"/tmp/work/big-{n}.bin", "wb") as f:
                    for _ in range(60):
                        f.write(b"x" * (1 << 20))
            print("written", flush=True)
        """)
        proc = subprocess.Popen(self.command("run", "--tmp-size", "512MiB", "--output-dir", out,
                                             "--timeout", "30s", probe, "--", self.marker),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        # A copy is under way while pysandbox holds a file open in the output directory.
        copying = False
        deadline = time.monotonic() + 30
        while not copying and proc.poll() is None and time.monotonic() < deadline:
            copying = any(link.startswith(f"{out}/") for link in open_files(proc.pid))
        proc.kill()
        stdout, stderr = proc.communicate(timeout=10)
        self.assertTrue(copying, f"pysandbox was never seen copying: {stdout!r} {stderr!r}")
        self.assertEqual(os.listdir(out), [], "a partial artifact was left in --output-dir")
        self.assertNothingLeft("a SIGKILL while artifacts were copied")


def open_files(pid: int) -> list[str]:
    """What the process's descriptors point at; those closed while looking are skipped."""
    links = []
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return links
    for fd in fds:
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return links


def phase_of(stdout: bytes, stderr: bytes) -> str:
    """Where a run was when it died, from what it had printed by then (-v prints the plan just
    before clone3; the script prints ready once it runs). Output still in a pipe buffer when the
    kill landed is read too, so a phase can only look earlier than it was, never later."""
    if b"ready" in stdout:
        return "running"
    if b"pysandbox: landlock" in stderr:
        return "setup (after the plan: clone3, namespaces, mounts)"
    return "before the plan"


class PipeTest(FaultTestCase):
    def test_script_closes_its_stdout_early(self):
        result = self.run_script(
            """
            import os, sys, time
            print("before close", flush=True)
            os.close(1)
            time.sleep(0.2)
            os.write(2, b"still running\\n")
            sys.stdout = None  # nothing to flush at exit
            """, timeout=20)
        self.assertExit(result, 0)
        self.assertIn(b"before close\n", result.stdout)
        self.assertIn(b"still running", result.stderr)
        self.assertNothingLeft()

    def test_caller_closes_the_read_end_of_stdout(self):
        path = script("import sys\nwhile True:\n    sys.stdout.write('x' * 4096)\n")
        proc = subprocess.Popen(self.command("run", "--timeout", "20s", path, "--", self.marker),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        self.assertEqual(proc.stdout.read(10), b"x" * 10)  # as `| head -c 10`
        proc.stdout.close()
        try:
            stderr = proc.stderr.read()
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            self.fail("pysandbox hung after the reader of its stdout went away")
        # Like any writer in a pipeline, the script learns its reader is gone (BrokenPipeError:
        # Python's exit 1, or 120 when flushing at exit fails); pysandbox itself neither dies of
        # SIGPIPE nor reports an error of its own, and the wall-clock limit was not needed.
        self.assertIn(proc.returncode, (1, 120), stderr)
        self.assertNotIn(b"pysandbox:", stderr)
        self.assertNothingLeft()


class ResourceTest(FaultTestCase):
    def test_full_tmp_is_enospc_and_the_run_reports_normally(self):
        result = self.run_script(
            """
            import errno
            written = 0
            try:
                with open("/tmp/fill", "wb") as f:
                    while True:
                        f.write(b"\\0" * 65536)
                        f.flush()
                        written += 65536
            except OSError as e:
                report({"errno": e.errno, "written": written})
            print("after", flush=True)
            """, options=["--tmp-size", "1MiB"])
        self.assertExit(result, 0)
        seen = parse_report(result.stdout)
        self.assertEqual(seen["errno"], errno.ENOSPC, result.describe())
        self.assertLessEqual(seen["written"], 1 << 20)
        self.assertTrue(result.stdout.endswith(b"after\n"))
        self.assertNothingLeft()

    def test_interpreter_missing_from_the_profiles_paths_is_127_with_one_line(self):
        # python3 exists on the host, but none of its directories is bound into the sandbox.
        path = profile('extends = "default"\n\n[filesystem]\nro = ["/etc/localtime"]\n')
        result = run(["run", "-p", path, script("print('must not run')"), "--", self.marker])
        self.assertOneLineError(result, 127, says=b"/usr/bin/python3")
        self.assertIn(b"not found", result.stderr)


class BadInputTest(FaultTestCase):
    """A profile or a script that is a directory, a FIFO, unreadable or enormous."""

    ENORMOUS = 50 << 20

    def fifo(self, name: str) -> str:
        path = temp_dir() / name
        os.mkfifo(path, 0o666)
        return str(path)

    def enormous(self, name: str, line: bytes) -> str:
        path = temp_dir() / name
        with open(path, "wb") as f:
            f.write(line * (self.ENORMOUS // len(line)))
        os.chmod(path, 0o644)
        return str(path)

    def run_profile(self, path) -> "object":
        return run(["run", "-p", str(path), script("print('must not run')"), "--", self.marker],
                   timeout=20)

    def run_path(self, path) -> "object":
        return run(["run", str(path), "--", self.marker], timeout=20)

    def test_profile_that_is_a_directory(self):
        self.assertOneLineError(self.run_profile(temp_dir()), says=b"directory")

    def test_profile_that_is_a_fifo_does_not_hang(self):
        result = self.run_profile(self.fifo("profile.toml"))
        self.assertOneLineError(result, says=b"not a regular file")

    def test_enormous_profile(self):
        result = self.run_profile(self.enormous("big.toml", b"# padding " * 10 + b"\n"))
        self.assertOneLineError(result, says=b"larger than 1 MiB")

    def assertUnreadableRefused(self, result):
        """For a root-owned mode 0600 file: refused as nobody; root reads it and runs."""
        if RUN_AS == "nobody":
            self.assertOneLineError(result, says=b"Permission denied")
        else:
            self.assertExit(result, 0)

    def test_unreadable_profile(self):
        path = profile('extends = "default"\n')
        os.chmod(path, 0o600)
        self.assertUnreadableRefused(self.run_profile(path))

    def test_script_that_is_a_directory(self):
        result = self.run_path(temp_dir())
        self.assertOneLineError(result, says=b"is a directory")

    def test_script_that_is_a_fifo_does_not_hang(self):
        result = self.run_path(self.fifo("probe.py"))
        self.assertOneLineError(result, says=b"not a regular file")

    def test_enormous_script(self):
        result = self.run_path(self.enormous("big.py", b"x = 1\n"))
        self.assertOneLineError(result, says=b"larger than 16 MiB")

    def test_enormous_program_on_stdin(self):
        result = run(["run", "-", "--", self.marker], input=b"x = 1\n" * (self.ENORMOUS // 6),
                     timeout=20)
        self.assertOneLineError(result, says=b"larger than 16 MiB")

    def test_unreadable_script(self):
        path = script("print('ran')")
        os.chmod(path, 0o600)
        self.assertUnreadableRefused(self.run_path(path))

    def test_profile_extends_a_path_the_host_cannot_look_at(self):
        for base in ("x/" * 3000 + "p.toml", "/proc/1/root/root/p.toml"):
            with self.subTest(base=base[:40]):
                result = self.run_profile(profile(f'extends = "{base}"\n'))
                self.assertOneLineError(result, says=b"extends: profile file ")
                self.assertNotIn(b"internal error", result.stderr)

    def test_profile_extends_a_fifo_does_not_hang(self):
        fifo = self.fifo("base.toml")
        result = self.run_profile(profile(f'extends = "{fifo}"\n'))
        self.assertOneLineError(result, says=b"not a regular file")


class BytesTest(FaultTestCase):
    RAW = bytes(range(1, 256)) + b"\xff\xfe\xc3\x28\xed\xa0\x80"

    def test_non_utf8_output_passes_through_byte_exact(self):
        result = self.run_script(
            f"""
            import sys
            sys.stdout.buffer.write({self.RAW!r})
            sys.stderr.buffer.write({self.RAW!r})
            """)
        self.assertExit(result, 0)
        self.assertEqual(result.stdout, self.RAW)
        self.assertEqual(result.stderr, self.RAW)

    def test_non_utf8_arguments_arrive_byte_exact(self):
        args = [b"\xff\xfe", b"caf\xe9", b"\xc3\x28", b"--not-a-flag\x80", b"\xed\xa0\x80"]
        path = script("import os, sys\nfor a in sys.argv[2:]:\n"
                      "    sys.stdout.buffer.write(os.fsencode(a) + b'\\0')\n")
        proc = subprocess.run(
            [os.fsencode(a) for a in self.command("run", path, "--", self.marker)] + args,
            stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, b"".join(a + b"\0" for a in args))

    def test_non_utf8_script_path_runs(self):
        directory = temp_dir()
        path = os.fsencode(str(directory)) + b"/\xff\xfe.py"
        with open(path, "wb") as f:
            f.write(b"print('ran')\n")
        os.chmod(path, 0o644)
        proc = subprocess.run([os.fsencode(a) for a in self.command("run")] + [path],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        self.assertEqual((proc.returncode, proc.stdout), (0, b"ran\n"), proc.stderr)


if __name__ == "__main__":
    unittest.main()
