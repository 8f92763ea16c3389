"""Running the binary: to completion with a timeout (``run``, a ``Result``), or in the
background while the host looks at it (``Running``).

The binary runs as PYSANDBOX_AS says (env.command_prefix). A ``run --json`` must print one
result valid under the result schema, a ``session`` one a line, whatever the test goes on to
check: otherwise AssertionError (see Result.json and Result.lines).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from typing import NamedTuple, Sequence

from support import result_schema
from support.env import PYSANDBOX, command_prefix
from support.procfs import marker_pids, sandboxed_python_pid


def clip_output(data: bytes, limit: int, cut: str) -> str:
    """``data`` as text for a message: whole up to ``limit`` characters, else its first and last
    halves of that around ``cut``."""
    text = data.decode("utf-8", "replace")
    return text if len(text) <= limit else text[:limit // 2] + cut + text[-(limit // 2):]


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
            return clip_output(data, 2000, " [...] ")

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
        for pid in marker_pids(self.marker, whole_arg=True):
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
