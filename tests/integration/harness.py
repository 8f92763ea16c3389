"""Shared helpers for the pysandbox integration tests.

The tests drive the built binary and judge the outcome from the host side: exit
status, bytes on the pipes, timing, and what the host can see in ``/proc`` and
on its own filesystem. What a probe script claims about itself is at most
secondary evidence.

Environment:
  PYSANDBOX      path to the binary (default: <repo>/build/bin/pysandbox)
  PYSANDBOX_AS   ``root``: run the binary as the current user, which must be root;
                 ``nobody``: run it as uid/gid 65534 through setpriv (needs root).
                 Unset: run it as whoever runs the tests.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import uuid
from pathlib import Path
from typing import NamedTuple, Sequence

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
import result_schema  # noqa: E402  (tests/result_schema.py: every --json result is checked)

PYSANDBOX = os.environ.get("PYSANDBOX", str(REPO / "build" / "bin" / "pysandbox"))
RUN_AS = os.environ.get("PYSANDBOX_AS", "")

NOBODY_UID = 65534
NOBODY_GID = 65534
SANDBOX_UID = 1000  # what getuid() returns inside
LIVE_TIMEOUT = "20s"  # wall-clock limit for probes the host inspects while they run
# Scratch directories in /tmp and /dev/shm that tests make, never a run: a leftover check skips
# them. The other suites' own are here too, since ctest -j may run them meanwhile, and the
# scratch directory of an MCP server the MCP suite is running.
TEST_HELPER_PREFIXES = ("pysandbox-it-", "pysandbox-unit-", "pysandbox-attack-", "pysandbox-ipc-",
                        "pysandbox-stdlib-", "pysandbox-python-", "pysandbox-install-",
                        "pysandbox-gendocs-", "pysandbox-completion-", "pysandbox-mcp-")
# A sanitizer build (ctest sets PYSANDBOX_SANITIZED) starts and exits several times slower. That
# is the instrumentation's cost, not the limits' precision: slack measured around the whole
# process scales with it.
TIME_SLACK_SCALE = 4.0 if os.environ.get("PYSANDBOX_SANITIZED") else 1.0

AS_NOBODY = [
    "setpriv",
    f"--reuid={NOBODY_UID}",
    f"--regid={NOBODY_GID}",
    "--clear-groups",
    "--",
]


def command_prefix() -> list[str]:
    """The wrapper that puts the binary in the requested caller identity."""
    if RUN_AS == "nobody":
        return list(AS_NOBODY)
    if RUN_AS in ("root", ""):
        return []
    raise RuntimeError(f"PYSANDBOX_AS must be 'root' or 'nobody', not {RUN_AS!r}")


def expected_host_uid() -> int:
    """The host uid the sandboxed script must run as."""
    if RUN_AS == "nobody":
        return NOBODY_UID
    euid = os.geteuid()
    # Invoked as root, the script runs as nobody on the host; otherwise as the caller.
    return NOBODY_UID if euid == 0 else euid


# The Debian package of each Python module the data-science tests need.
DEBIAN_PACKAGE = {"numpy": "python3-numpy", "pandas": "python3-pandas",
                  "matplotlib": "python3-matplotlib"}
SANDBOX_PYTHON = "/usr/bin/python3"  # the shipped profiles' [python] interpreter


def require_modules(*names: str) -> None:
    """Raise AssertionError (never skip) unless the sandbox's interpreter can import every
    module in ``names``. A test that needs numpy, pandas or matplotlib must fail where they are
    missing, saying so, instead of passing without having tested anything."""
    if not names:
        return
    code = ("import importlib.util, sys\n"
            "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))")
    proc = subprocess.run([SANDBOX_PYTHON, "-c", code, *names], capture_output=True, text=True,
                          timeout=60)
    missing = proc.stdout.split() if proc.returncode == 0 else list(names)
    if missing:
        packages = " ".join(DEBIAN_PACKAGE.get(m, m) for m in missing)
        raise AssertionError(f"{SANDBOX_PYTHON} cannot import {', '.join(missing)}: this test "
                             f"needs them and fails without them (apt-get install {packages})"
                             + (f"; {proc.stderr.strip()}" if proc.returncode else ""))


def check_environment() -> None:
    """Raise AssertionError (never skip) when the suite cannot be run meaningfully."""
    command_prefix()  # validates PYSANDBOX_AS
    if RUN_AS in ("root", "nobody") and os.geteuid() != 0:
        raise AssertionError(f"PYSANDBOX_AS={RUN_AS} needs the tests to run as root")
    if not os.path.isfile(PYSANDBOX) or not os.access(PYSANDBOX, os.X_OK):
        raise AssertionError(f"pysandbox binary not found or not executable: {PYSANDBOX}")


# --------------------------------------------------------------------------- running


class Result(NamedTuple):
    returncode: int
    stdout: bytes
    stderr: bytes
    elapsed: float

    @property
    def output(self) -> bytes:
        return self.stdout + self.stderr

    def describe(self) -> str:
        """A compact rendering for assertion messages."""

        def clip(data: bytes) -> str:
            text = data.decode("utf-8", "replace")
            return text if len(text) <= 2000 else text[:1000] + " [...] " + text[-1000:]

        return (
            f"\n  exit={self.returncode} elapsed={self.elapsed:.3f}s"
            f"\n  stdout={clip(self.stdout)!r}\n  stderr={clip(self.stderr)!r}"
        )

    def json(self) -> dict:
        """The pysandbox.result/v1 object that ``run --json`` printed, checked against the
        schema (tests/result_schema.py); AssertionError, with this run described, otherwise."""
        try:
            return result_schema.parse_result(self.stdout)
        except result_schema.SchemaError as e:
            raise result_schema.SchemaError(f"{e}{self.describe()}") from None

    def lines(self) -> list[dict]:
        """The pysandbox.result/v1 objects that ``session`` printed, one a line, each checked
        against the schema; AssertionError, with this run described, otherwise."""
        try:
            return result_schema.parse_lines(self.stdout)
        except result_schema.SchemaError as e:
            raise result_schema.SchemaError(f"{e}{self.describe()}") from None


def wants_result(args: Sequence) -> bool:
    """Whether ``pysandbox ARGS`` owes a result object on stdout: ``run`` with ``--json`` among
    its options (before ``--``, after which arguments are the script's)."""
    words = [os.fsdecode(a) if isinstance(a, bytes) else str(a) for a in args]
    if not words or words[0] != "run":
        return False
    options = words[:words.index("--")] if "--" in words else words
    return "--json" in options


def check_results(args: Sequence, result: "Result") -> None:
    """A ``run --json`` owes one valid result, a ``session`` one valid result a line (its stdin,
    never a terminal here, makes it speak NDJSON): AssertionError otherwise."""
    if wants_result(args):
        result.json()
    elif args and str(args[0]) == "session":
        result.lines()


def _popen(args: Sequence[str], *, stdin, pass_fds=(), env=None, cwd=None) -> subprocess.Popen:
    return subprocess.Popen(
        command_prefix() + [PYSANDBOX, *map(str, args)],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=tuple(pass_fds),
        env=env,
        cwd=cwd,
    )


def run(
    args: Sequence[str],
    input: bytes | None = None,
    timeout: float = 30,
    pass_fds: Sequence[int] = (),
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
) -> Result:
    """Run ``pysandbox ARGS`` to completion. The caller's stdin is empty unless ``input``.

    A ``run --json`` must print one result valid under the result schema, a ``session`` one a
    line, whatever the test goes on to check: otherwise this raises AssertionError (see
    Result.json and Result.lines)."""
    start = time.monotonic()
    proc = _popen(
        args,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        pass_fds=pass_fds,
        env=env,
        cwd=cwd,
    )
    try:
        stdout, stderr = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            stdout, stderr = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # something that outlived pysandbox holds the pipes
            stdout = stderr = b"<pipes still held open by a surviving process>"
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe:
                    pipe.close()
            proc.wait()
        raise AssertionError(
            f"pysandbox {list(args)} did not finish within {timeout}s"
            + Result(-1, stdout, stderr, time.monotonic() - start).describe()
        ) from None
    result = Result(proc.returncode, stdout, stderr, time.monotonic() - start)
    check_results(args, result)
    return result


# --------------------------------------------------------------------------- files


_temp_dirs: list[str] = []


@atexit.register
def _remove_temp_dirs() -> None:
    for path in _temp_dirs:
        shutil.rmtree(path, ignore_errors=True)


def temp_dir(mode: int = 0o755) -> Path:
    """A fresh directory under /tmp that the unprivileged caller can read."""
    path = tempfile.mkdtemp(prefix="pysandbox-it-", dir="/tmp")
    os.chmod(path, mode)
    _temp_dirs.append(path)
    return Path(path)


def write_file(path: Path, text: str | bytes, mode: int = 0o644) -> Path:
    data = text.encode() if isinstance(text, str) else text
    path.write_bytes(data)
    os.chmod(path, mode)
    return path


def script(text: str, name: str = "probe.py", directory: Path | None = None) -> Path:
    """Write a (dedented) Python script into a fresh directory readable by nobody."""
    directory = directory or temp_dir()
    return write_file(directory / name, textwrap.dedent(text).lstrip())


def profile(text: str, name: str = "profile.toml") -> Path:
    """Write a TOML profile (dedented) into a fresh directory; return its absolute path."""
    return script(text, name=name)


def new_marker() -> str:
    """A token that, passed as a script argument, tags every process of one run."""
    return f"pysandbox-marker-{uuid.uuid4().hex}"


def preload_marker() -> str:
    """A marker that is also a module name: put in a profile's [python] preload (marked_profile),
    it tags the command lines of every sandbox that profile starts ahead of its job, and of a
    zygote and each job it forks, where the marker as a script argument cannot go."""
    return new_marker().replace("-", "_")


def marked_profile(marker: str, base: str = "default", extra: str = "") -> Path:
    """The profile `base` with `extra` TOML and `marker` as its [python] preload (a module that
    does not exist: each sandbox warns, and runs)."""
    return profile(f'extends = "{base}"\n{extra}\n[python]\npreload = ["{marker}"]\n',
                   name=f"{marker}.toml")


def jobs_file(jobs) -> Path:
    """A batch's JSON-lines jobs file, readable by nobody."""
    return script("".join(json.dumps(job) + "\n" for job in jobs), name="jobs.jsonl")


def new_secret() -> str:
    return f"SECRET-{uuid.uuid4().hex}"


# --------------------------------------------------------------------------- /proc


def _read_cmdline(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def leftovers(marker: str) -> list[int]:
    """Host pids of live processes (other than this one) whose argv carries ``marker``."""
    token = marker.encode()
    me = os.getpid()
    return [pid for pid in _all_pids() if pid != me and token in _read_cmdline(pid)]


def wait_for_no_leftovers(marker: str, grace: float) -> list[int]:
    """Poll up to ``grace`` seconds for the marker's processes to be gone; return survivors."""
    deadline = time.monotonic() + grace
    while (survivors := leftovers(marker)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return survivors


def proc_status(pid: int) -> dict[str, str]:
    """``/proc/PID/status`` as a dict of stripped values."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def _innermost_pid(pid: int) -> int | None:
    try:
        return int(proc_status(pid)["NSpid"].split()[-1])
    except (OSError, KeyError, ValueError):
        return None


def _exe_name(pid: int) -> str:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return ""


def _pid_namespace(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        return int(proc_status(pid)["PPid"])
    except (OSError, KeyError, ValueError):
        return -1


def sandboxed_python_pid(marker: str) -> int:
    """Host pid of the sandboxed interpreter carrying ``marker`` (the script itself).

    The supervisor, a setpriv wrapper and the sandbox's init may carry the marker
    in their argv too; the interpreter is the one whose executable is a python.
    Should several match, prefer those in a foreign PID namespace, then the leaf.
    """
    candidates = [pid for pid in leftovers(marker) if _exe_name(pid).startswith("python")]
    if len(candidates) > 1:
        own = _pid_namespace(os.getpid())
        candidates = [p for p in candidates if _pid_namespace(p) != own] or candidates
    if len(candidates) > 1:
        parents = {_parent(pid) for pid in candidates}
        candidates = [pid for pid in candidates if pid not in parents]
    if len(candidates) != 1:
        details = {pid: (_exe_name(pid), _read_cmdline(pid)) for pid in leftovers(marker)}
        raise AssertionError(
            f"expected exactly one sandboxed python carrying {marker}, found {candidates}: {details}"
        )
    return candidates[0]


# --------------------------------------------------------------------------- live runs


class Running:
    """A sandboxed probe that runs in the background until the test is done with it.

    The probe must print ``ready`` (flushed) once it has set itself up and then block
    reading stdin; leaving the ``with`` block closes stdin so it can exit. Meanwhile
    ``self.pid`` is the host pid of the sandboxed python, for host-side inspection.
    """

    READY = b"ready\n"

    def __init__(self, args: Sequence[str], *, marker: str, pass_fds=(), env=None,
                 ready_timeout: float = 10):
        self.args = list(args)
        self.marker = marker
        self.pass_fds = pass_fds
        self.env = env
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen | None = None
        self.pid = -1
        self.early_stdout = b""
        self.result: Result | None = None
        self._start = 0.0

    def __enter__(self) -> "Running":
        self._start = time.monotonic()
        self.proc = _popen(self.args, stdin=subprocess.PIPE, pass_fds=self.pass_fds, env=self.env)
        try:
            self._wait_ready()
            self.pid = sandboxed_python_pid(self.marker)
        except BaseException:
            self._kill()
            raise
        return self

    def _wait_ready(self) -> None:
        self.read_until(self.READY, self.ready_timeout)

    def read_until(self, token: bytes, timeout: float = 10) -> bytes:
        """Read the probe's stdout until ``token`` has arrived; return everything so far."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while token not in self.early_stdout:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise AssertionError(
                    f"probe did not print {token!r} in time; stdout so far {self.early_stdout!r}"
                )
            chunk = os.read(fd, 65536)
            if not chunk:
                _, stderr = self.proc.communicate(timeout=10)
                raise AssertionError(
                    f"probe exited (status {self.proc.returncode}) before printing {token!r}; "
                    f"stdout {self.early_stdout!r}, stderr {stderr!r}"
                )
            self.early_stdout += chunk
        return self.early_stdout

    def send(self, data: bytes) -> None:
        """Write to the probe's stdin without closing it."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def finish(self, timeout: float = 10) -> Result:
        """Close the probe's stdin and collect its result."""
        assert self.proc is not None
        if self.result is None:
            try:
                stdout, stderr = self.proc.communicate(b"", timeout=timeout)
            except subprocess.TimeoutExpired:
                self._kill()
                raise AssertionError("probe did not exit after its stdin was closed") from None
            self.result = Result(self.proc.returncode, self.early_stdout + stdout, stderr,
                                 time.monotonic() - self._start)
            check_results(self.args, self.result)
        return self.result

    def _kill(self) -> None:
        """Tear the run down hard, without hanging on pipes an orphan may hold open."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        for pid in leftovers(self.marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.finish()
        else:
            self._kill()


def parse_report(stdout: bytes):
    """Decode the ``REPORT <json>`` line a probe printed (see REPORT_HELPER)."""
    for line in stdout.splitlines():
        if line.startswith(b"REPORT "):
            return json.loads(line[len(b"REPORT "):])
    raise AssertionError(f"the probe printed no REPORT line; stdout {stdout!r}")


# Prepend to a probe body to get report(obj): one JSON line the test can parse.
REPORT_HELPER = """
import json as _json
def report(obj):
    print("REPORT " + _json.dumps(obj), flush=True)
"""

def probe_script(body: str, directory: Path | None = None) -> Path:
    """A script made of REPORT_HELPER followed by ``body`` (dedented)."""
    return script(REPORT_HELPER + textwrap.dedent(body), directory=directory)


# A probe body usable with Running: print ready, wait for stdin EOF.
WAIT_FOR_HOST = """
import sys
print("ready", flush=True)
sys.stdin.read()
"""


# --------------------------------------------------------------------------- base class


class SandboxTestCase(unittest.TestCase):
    """Fails (never skips) when the binary or the requested mode is unavailable."""

    maxDiff = None
    # Python modules every test of the class needs inside the sandbox (see require_modules).
    NEEDS_MODULES: tuple[str, ...] = ()

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        check_environment()
        require_modules(*cls.NEEDS_MODULES)

    def setUp(self) -> None:
        self.marker = new_marker()
        # Registered first, so it runs after every other cleanup (they run last-in first-out).
        self.addCleanup(self._check_leftovers)

    def _check_leftovers(self) -> None:
        # Every test must leave nothing behind, whatever it checked. Tests that care about
        # the exact moment check leftovers() themselves; this is the safety net.
        survivors = wait_for_no_leftovers(self.marker, grace=1.0)
        for pid in survivors:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.assertEqual(survivors, [], "processes carrying the test's marker outlived the run")

    def run_script(self, body: str, *args: str, options: Sequence[str] = (),
                   directory: Path | None = None, **kwargs) -> Result:
        """Write ``body`` to a script and run it with the marker as its first argument.

        The script can call ``report(obj)`` (see REPORT_HELPER) to hand back data.
        """
        path = probe_script(body, directory)
        return run(["run", *options, path, "--", self.marker, *args], **kwargs)

    def running(self, body: str, *args: str, options: Sequence[str] = (),
                directory: Path | None = None, **kwargs) -> Running:
        """Like run_script, but in the background (see Running).

        Unless the test sets one, the wall-clock limit is raised to LIVE_TIMEOUT so a
        slow host-side inspection cannot race the default limit.
        """
        path = probe_script(body, directory)
        if "--timeout" not in options:
            options = ["--timeout", LIVE_TIMEOUT, *options]
        return Running(["run", *options, path, "--", self.marker, *args],
                       marker=self.marker, **kwargs)

    def assertExit(self, result: Result, code: int) -> None:
        self.assertEqual(result.returncode, code, result.describe())
