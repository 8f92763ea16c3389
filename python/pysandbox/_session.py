"""``Session``: one sandboxed interpreter kept across cells (``pysandbox session --ndjson``)."""

from __future__ import annotations

import base64
import json
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import IO, Any

from . import _process
from ._errors import SandboxError
from ._process import EnvSpec, InputSpec, StrPath
from ._result import Result

# How long close() lets the session end by itself once its stdin is closed, before killing it.
_CLOSE_GRACE_SECONDS = 10.0


class CellResult(Result):
    """How one cell of a :class:`Session` ended: a :class:`Result` whose session fields are
    filled in: ``id`` (the request's), ``cell`` (its number, from 1), ``sandbox`` (which sandbox
    of the session ran it, from 1), ``state`` (``"kept"`` or ``"lost"``), ``value`` (the repr
    of the cell's final expression, or None) and ``figures`` (the figures left open)."""

    @property
    def kept(self) -> bool:
        """Whether the interpreter's state (variables, imports, files) survived the cell."""
        return self.state == "kept"


FileSpec = Mapping[str, "str | bytes"]
"""Files for a cell: name (under /tmp/work) to content, text or bytes."""


def _file_entries(files: FileSpec) -> list[dict[str, str]]:
    entries = []
    for name, content in files.items():
        if isinstance(content, str):
            entries.append({"name": name, "text": content})
        else:
            entries.append({"name": name, "base64": base64.b64encode(content).decode("ascii")})
    return entries


class Session:
    """A sandboxed Python interpreter whose variables, imports and files in /tmp/work survive
    from one cell to the next (``pysandbox session --ndjson``)::

        with pysandbox.Session(profile="datascience") as session:
            session.run("import pandas as pd\\ndf = pd.DataFrame({'a': [1, 2]})")
            print(session.run("df.a.sum()").value)          # 3

    Each :meth:`run` writes one request and reads its one response. A cell that raises, times
    out or is killed is a :class:`CellResult` whose ``state`` says whether the interpreter
    survived (after a kill a new sandbox serves the next cell, with nothing kept); only
    pysandbox's own failures raise :class:`SandboxError`. :meth:`close` (or leaving the ``with``
    block) ends the session and leaves nothing running.

    Args:
        profile: a profile name or file, as for :func:`pysandbox.run`.
        timeout: the longest a cell may run (``--timeout``); the profile's when None.
        inputs, env, net: as for :func:`pysandbox.run`, for the whole session.
        idle_timeout: end the session when no cell came for this long (``--idle-timeout``).
        lifetime: end the session this long after it started (``--lifetime``).
        binary: the pysandbox executable; else ``$PYSANDBOX_BINARY``, else ``pysandbox`` on PATH.
        extra_args: other options of ``pysandbox session`` (``["--memory", "256MiB"]``).

    Raises:
        SandboxError: the binary could not be started.
    """

    def __init__(self, *, profile: StrPath | None = None, timeout: float | str | None = None,
                 inputs: Iterable[InputSpec] = (), env: EnvSpec = (), net: str | None = None,
                 idle_timeout: float | str | None = None, lifetime: float | str | None = None,
                 binary: StrPath | None = None, extra_args: Sequence[str] = ()) -> None:
        session_options: list[str] = []
        if idle_timeout is not None:
            session_options += ["--idle-timeout", _process.duration(idle_timeout)]
        if lifetime is not None:
            session_options += ["--lifetime", _process.duration(lifetime)]
        options = _process.run_options(profile=profile, timeout=timeout, inputs=inputs, env=env,
                                       net=net, extra_args=[*session_options, *extra_args])
        argv = [_process.find_binary(binary), "session", "--ndjson", *options]
        self._next_id = 1
        self._stderr: IO[bytes] = tempfile.TemporaryFile()
        try:
            self._process: subprocess.Popen[bytes] = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr)
        except OSError as e:
            self._stderr.close()
            raise SandboxError(f"cannot run {argv[0]}: {e}") from None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """Whether the session has ended (closed, or its process gone)."""
        return self._process.poll() is not None

    def run(self, code: str, *, timeout: float | str | None = None,
            files: FileSpec | None = None) -> CellResult:
        """Run one cell in the session's interpreter and return how it ended.

        Args:
            code: the cell's text; the repr of a final expression statement is the result's
                ``value``, as a REPL shows it.
            timeout: this cell's wall-clock limit (at most the session's); when it is reached
                the cell gets a KeyboardInterrupt and the state is kept, or, if it does not
                stop, the sandbox is killed and the state is lost.
            files: files to place in /tmp/work before the cell runs (name to text or bytes).

        Raises:
            SandboxError: the session is closed, or pysandbox failed: it refused to start (a
                bad option or profile; its message), or it ended or answered out of turn.
        """
        request: dict[str, Any] = {"id": self._next_id, "code": code}
        self._next_id += 1
        if timeout is not None:
            request["timeout"] = _process.duration(timeout)
        if files:
            request["files"] = _file_entries(files)
        return self._exchange(request)

    def _exchange(self, request: Mapping[str, Any]) -> CellResult:
        stdin, stdout = self._process.stdin, self._process.stdout
        if stdin is None or stdout is None or stdin.closed:
            raise SandboxError("the session is closed")
        try:
            stdin.write(json.dumps(request).encode("utf-8") + b"\n")
            stdin.flush()
        except BrokenPipeError:
            pass  # the process is gone: reading says why
        line = stdout.readline()
        if not line:
            raise self._ended()
        try:
            result = CellResult.from_json(json.loads(line))
        except ValueError as e:
            raise SandboxError(f"pysandbox session printed a line that is not JSON ({e}): "
                               f"{line!r:.200}") from None
        if _process.is_refusal(result):
            self.close()
            raise SandboxError(result.message or self._stderr_text() or "session refused",
                               returncode=self._process.returncode, stderr=self._stderr_text(),
                               result=result)
        if result.id != request["id"]:
            raise SandboxError(f"pysandbox session answered request {result.id!r}, not "
                               f"{request['id']!r}", result=result)
        return result

    def _stderr_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace").strip()

    def _ended(self) -> SandboxError:
        """The error for a session process that stopped answering: it ended, and says why."""
        self.close()
        stderr = self._stderr_text()
        code = self._process.returncode
        said = stderr[-2000:] if stderr else "no message"
        return SandboxError(f"pysandbox session ended (exit status {code}): {said}",
                            returncode=code, stderr=stderr)

    def close(self) -> None:
        """End the session: close its stdin, give it a moment to finish, then kill it. The
        sandbox and everything in it are gone afterwards. Closing twice is harmless."""
        process = self._process
        if process.stdin is not None and not process.stdin.closed:
            try:
                process.stdin.close()
            except BrokenPipeError:
                pass
        try:
            process.wait(timeout=_CLOSE_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
