"""A worker's warm pysandbox: one long-lived ``pysandbox batch -`` per profile and options, fed
job lines on its stdin by the worker's tasks, each waiting for its own result line. It is
``pysandbox batch --fork`` when asked, or, by default, when a forked job would be enforced as a
plain one is (:func:`why_not_fork`).

``pysandbox batch`` without ``--keep-order`` writes each job's result line as soon as the job
ends, with ``line``: the job's line in its input, from 1. A server numbers the lines it writes
the same way, so a result finds the task that waits for it whatever order the jobs end in.
Nothing here imports ``distributed``: the plugin in ``pysandbox.dask`` holds a :class:`Servers`.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from typing import IO, Any

from .. import _process
from .._errors import SandboxError

MAX_SERVERS = 4
"""Servers a worker keeps at most (one per profile and option set its tasks used); past it the
least recently used idle one is closed: each holds warm sandboxes."""

_STARTS = 3
"""Servers started in a row for one job before giving up: each ended before the job was sent."""

_PROBE_JOB = b'{"code": "pass"}\n'

_log = logging.getLogger("pysandbox.dask")


class ServerGone(Exception):
    """The server had ended before the job was handed to it: the job was not sent."""


class _Waiter:
    """One job sent: its result, or the refusal of a server that never ran a job."""

    __slots__ = ("done", "result", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: dict[str, Any] | None = None
        self.error: SandboxError | None = None

    def answer(self, result: dict[str, Any] | None, error: SandboxError | None = None) -> None:
        self.result, self.error = result, error
        self.done.set()

    def wait(self) -> dict[str, Any]:
        self.done.wait()
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def _job_id(line: str) -> Any:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj.get("id") if isinstance(obj, dict) else None


def _lost_result(line: str, profile: str, returncode: int, stderr: str) -> dict[str, Any]:
    """The result of a job whose server ended before answering it: ``sandbox_error`` with
    ``error.step`` "worker", every run field present (the result schema's run shape)."""
    from .. import __version__

    if returncode < 0:
        how = f"was killed by {signal.Signals(-returncode).name}"
    else:
        how = f"exited with status {returncode}"
    said = stderr.strip()[-500:]
    message = (f"the worker's pysandbox batch {how} before the job's result"
               + (f" ({said})" if said else "") + "; the job may have run in part")
    return {
        "schema": "pysandbox.result/v1", "version": __version__, "id": _job_id(line),
        "status": "sandbox_error", "exit_code": None, "signal": None,
        "pysandbox_exit_code": 128 - returncode if returncode < 0 else returncode,
        "message": message, "stdout": "", "stderr": "",
        "encoding": {"stdout": "utf-8", "stderr": "utf-8"}, "output": [],
        "truncated": {"stdout": False, "stderr": False}, "bytes": {"stdout": 0, "stderr": 0},
        "exception": None, "violations": [], "files": [], "files_omitted": 0, "syscalls": None,
        "usage": None, "limits": None, "enforcement": None, "profile": profile,
        "error": {"message": message, "step": "worker", "errno": None}, "warnings": []}


def _probe(argv: Sequence[str]) -> dict[str, Any] | str:
    """What enforced one trivial job of ``argv`` (a ``pysandbox batch`` reading stdin): its
    result's ``enforcement``; or, when it gave no ``ok`` result (it refused its options or
    profile, or the job failed), why not."""
    completed = _process.call(argv, _PROBE_JOB)
    lines = completed.stdout.splitlines()
    said = completed.stderr.decode("utf-8", "replace").strip()[-500:]
    try:
        [line] = lines
        obj = json.loads(line)
        enforcement = obj["enforcement"] if obj["status"] == "ok" else None
    except (ValueError, KeyError, TypeError):
        enforcement = None
    if completed.returncode != 0 or not isinstance(enforcement, dict):
        return said or f"exit status {completed.returncode}, {len(lines)} result lines"
    return enforcement


def why_not_fork(profile: str, options: Sequence[str]) -> str | None:
    """Why jobs of ``profile`` with ``options`` (those of ``pysandbox batch``, without
    ``--fork``) should not be forked on this host; None when they may.

    A job is forked only when this host's pysandbox enforces a forked one exactly as it enforces
    a plain one (the two results' ``enforcement`` equal): not on gVisor, which has no fork
    server (``batch --fork`` refuses it), nor where a plain job would get a cgroup of its own (a
    forked one has rlimits only), so that forking by default weakens nothing pysandbox reports.
    What ``--fork`` changes beyond that (BATCH in pysandbox(1): jobs in a row share the zygote's
    address-space layout, stack canary and str hash secret) comes with the default;
    ``fork=False`` keeps it off. Costs two one-job batches, once per server started.
    """
    argv = [_process.find_binary(), "batch", "--quiet", "--jobs", "1", "--profile", profile,
            *options]
    forked = _probe([*argv, "--fork", "-"])
    if isinstance(forked, str):
        return f"pysandbox batch --fork ran no job: {forked}"
    plain = _probe([*argv, "-"])
    if isinstance(plain, str):
        return f"pysandbox batch ran no job: {plain}"
    differs = sorted(key for key in plain.keys() | forked.keys()
                     if plain.get(key) != forked.get(key))
    if differs:
        return ("a forked job's enforcement differs from a plain one's in "
                + ", ".join(f"{key} ({forked.get(key)!r}, not {plain.get(key)!r})"
                            for key in differs))
    return None


def check_fork(fork: object) -> None:
    """Raises TypeError unless ``fork`` is True, False or None: ``fork="no"`` must not fork, as
    its truth would make it."""
    if fork is not None and not isinstance(fork, bool):
        raise TypeError(f"fork is True, False or None, not {fork!r}")


def _forks(profile: str, options: Sequence[str], fork: bool | None) -> bool:
    """Whether a server of ``profile`` with ``options`` gets ``--fork`` added (see
    :meth:`Servers.send`)."""
    if fork is not None or "--fork" in options:
        return bool(fork) and "--fork" not in options
    why_not = why_not_fork(profile, options)
    if why_not is not None:
        _log.info("jobs of profile %s not forked: %s", profile, why_not)
    return why_not is None


class Server:
    """One ``pysandbox batch --jobs N --profile PROFILE [OPTIONS] -`` and the thread that reads
    its results. Many threads may :meth:`send` at once.

    At most ``window`` jobs are in the server at a time (sent, not answered): enough to keep
    its N sandboxes busy, and no more, so that a worker killed with SIGKILL (its server then
    reads the end of its input and ends after the jobs it has) leaves little work behind.

    When the process ends (killed, crashed, closed), every job sent and not yet answered gets
    a ``sandbox_error`` result (step "worker"), or, when the server ended by itself without
    ever answering a job (it refused its options or profile), SandboxError with its message;
    :meth:`send` raises ServerGone for a job not yet sent. A job is answered once, never lost.
    """

    def __init__(self, argv: Sequence[str], profile: str, window: int) -> None:
        self.profile = profile
        self._stderr: IO[bytes] = tempfile.TemporaryFile()
        self._slots = threading.Semaphore(window)
        self._send_lock = threading.Lock()  # the order of the lines, and so their numbers
        self._lock = threading.Lock()  # what follows
        self._waiting: dict[int, tuple[_Waiter, str]] = {}
        self._lines = 0
        self._answered = 0
        self._ended = False
        self._closing = False
        try:
            self._process = subprocess.Popen(list(argv), stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=self._stderr)
        except OSError as e:
            self._stderr.close()
            raise SandboxError(f"cannot run {argv[0]}: {e}") from None
        self._reader = threading.Thread(target=self._read, name="pysandbox-dask-server",
                                         daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def ended(self) -> bool:
        return self._ended

    @property
    def in_flight(self) -> int:
        """Jobs sent and not yet answered."""
        with self._lock:
            return len(self._waiting)

    def send(self, line: str) -> _Waiter:
        """Send one job line (not blank); its waiter gives its result.

        Raises:
            ServerGone: the server had ended before it was sent.
        """
        # Checked and encoded first: pysandbox batch answers each line but a blank one, and a
        # line that is not sent whole (two lines in one, a lone surrogate) must fail before it
        # has a number, or later results would be handed to other jobs than their own.
        if "\n" in line or not line.strip():
            raise ValueError("a job line is blank or holds a newline")
        data = line.encode("utf-8") + b"\n"
        self._slots.acquire()  # given back with the job's answer
        waiter = _Waiter()
        with self._send_lock:
            with self._lock:
                if self._ended:
                    self._slots.release()
                    raise ServerGone()
                self._lines += 1
                self._waiting[self._lines] = (waiter, line)
            try:
                assert self._process.stdin is not None
                self._process.stdin.write(data)
                self._process.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass  # ended meanwhile: the reading thread answers the job registered above
        return waiter

    def _read(self) -> None:
        assert self._process.stdout is not None
        try:
            for raw in self._process.stdout:
                try:
                    obj = json.loads(raw)
                    with self._lock:
                        waiter, _ = self._waiting.pop(obj["line"])
                        self._answered += 1
                except (ValueError, KeyError, TypeError):
                    # Not a result for a job sent: nothing it says can be trusted after it.
                    self._process.kill()
                    break
                waiter.answer(obj)
                self._slots.release()
        finally:
            self._process.stdout.close()
            returncode = self._process.wait()
            self._stderr.seek(0)
            stderr = self._stderr.read().decode("utf-8", "replace")
            self._stderr.close()
            with self._lock:
                self._ended = True
                lost, self._waiting = self._waiting, {}
                refused = self._answered == 0 and returncode > 0 and not self._closing
            for waiter, line in lost.values():
                if refused:
                    waiter.answer(None, SandboxError(
                        f"pysandbox batch failed (exit status {returncode}): "
                        f"{stderr.strip()[-2000:] or 'no message'}",
                        returncode=returncode, stderr=stderr))
                else:
                    waiter.answer(_lost_result(line, self.profile, returncode, stderr))
                self._slots.release()

    def close_if_idle(self) -> bool:
        """Close the server if it has no job in it; whether it did."""
        with self._lock:
            if self._waiting:
                return False
            self._ended = True
        self.close()
        return True

    def close(self, grace: float = _process.STOP_GRACE_SECONDS) -> None:
        """End the server: no more jobs; those running are stopped (SIGTERM, then SIGKILL
        after ``grace`` seconds) and answered with ``sandbox_error`` results."""
        with self._lock:
            self._ended = True
            self._closing = True
        _process.stop(self._process, grace)
        try:
            assert self._process.stdin is not None
            self._process.stdin.close()
        except BrokenPipeError:
            pass
        self._reader.join()


class Servers:
    """A worker's servers, one per (profile, options, fork), started on first use and started
    again after one has ended. Thread-safe.

    Args:
        jobs_at_once: each server's ``--jobs`` (the worker's threads; else one per CPU).
    """

    def __init__(self, jobs_at_once: int | None = None) -> None:
        self.jobs_at_once = jobs_at_once or os.cpu_count() or 1
        self._lock = threading.Lock()
        self._servers: dict[tuple[str, tuple[str, ...], bool | None], Server] = {}
        self._closed = False

    def send(self, profile: str, options: Sequence[str], line: str,
             fork: bool | None = None) -> _Waiter:
        """Send ``line`` (a job of ``profile``, not blank) to that profile's server with
        ``options`` (a new one in place of one that has ended); its waiter's ``wait()`` gives
        its result, or raises SandboxError when the server refused its options or profile.

        ``fork``: True adds ``--fork`` to ``options``; None does where :func:`why_not_fork` finds
        nothing against it, decided when the server starts; False never (``--fork`` among
        ``options`` forks whatever it says)."""
        check_fork(fork)
        for _ in range(_STARTS):
            try:
                return self._server(profile, tuple(options), fork).send(line)
            except ServerGone:
                continue  # not sent: to the server started in its place
        raise SandboxError(f"pysandbox batch ended {_STARTS} times before a job could be sent "
                           f"to it")

    def run(self, profile: str, options: Sequence[str], lines: Sequence[str],
            fork: bool | None = None) -> list[dict[str, Any]]:
        """The results of ``lines`` (see :meth:`send`), in their order."""
        waiters = [self.send(profile, options, line, fork) for line in lines]
        return [waiter.wait() for waiter in waiters]

    def _server(self, profile: str, options: tuple[str, ...], fork: bool | None) -> Server:
        key = (profile, options, fork)
        forks: bool | None = None
        while True:
            with self._lock:
                if self._closed:
                    raise SandboxError("the worker's pysandbox servers are closed")
                server = self._servers.pop(key, None)
                if (server is None or server.ended) and forks is not None:
                    argv = [_process.find_binary(), "batch", "--quiet", "--jobs",
                            str(self.jobs_at_once), "--profile", profile, *options,
                            *(["--fork"] if forks else []), "-"]
                    server = Server(argv, profile, window=2 * self.jobs_at_once)
                if server is not None and not server.ended:
                    self._servers[key] = server  # last: the most recently used
                    for other_key, other in list(self._servers.items()):
                        if len(self._servers) <= MAX_SERVERS:
                            break
                        if other_key != key and other.close_if_idle():
                            del self._servers[other_key]
                    return server
            # Decided without the lock: deciding runs batches of the profile, whose sandboxes may
            # be slow to start (or never start), and the worker's other servers must not wait.
            # A server another thread started meanwhile is taken instead.
            forks = _forks(profile, options, fork)

    def pids(self) -> dict[int, int]:
        """The servers running, as process id: jobs sent and not yet answered (for tests and
        diagnostics)."""
        with self._lock:
            return {s.pid: s.in_flight for s in self._servers.values() if not s.ended}

    def close(self) -> None:
        """End every server (the worker closes); later calls of run raise SandboxError."""
        with self._lock:
            self._closed = True
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.close()


_own: Servers | None = None
_own_lock = threading.Lock()


def own_servers() -> Servers:
    """The servers of this process when it is no Dask worker (a task function called
    directly): made on first use, closed at exit."""
    global _own
    with _own_lock:
        if _own is None:
            _own = Servers()
            atexit.register(_own.close)
        return _own
