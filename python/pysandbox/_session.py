"""``Session``: one sandboxed interpreter kept across cells (``pysandbox session --ndjson``)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import IO, Any

from . import _files, _process
from ._calls import CellReader, OutputCallback, Streaming
from ._errors import SandboxError
from ._files import FileInfo
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


def session_argv(*, profile: StrPath | None, timeout: float | str | None,
                 inputs: Iterable[InputSpec], env: EnvSpec, net: str | None, kernel: str | None,
                 idle_timeout: float | str | None, lifetime: float | str | None,
                 output_dir: StrPath | None, binary: StrPath | None,
                 extra_args: Sequence[str]) -> list[str]:
    """The command line of ``pysandbox session --ndjson`` for a Session's arguments."""
    session_options: list[str] = []
    if idle_timeout is not None:
        session_options += ["--idle-timeout", _process.duration(idle_timeout)]
    if lifetime is not None:
        session_options += ["--lifetime", _process.duration(lifetime)]
    if output_dir is not None:
        session_options += ["--output-dir", os.path.abspath(output_dir)]
    options = _process.run_options(profile=profile, timeout=timeout, inputs=inputs, env=env,
                                   net=net, kernel=kernel, extra_args=[*session_options,
                                   *extra_args])
    return [_process.find_binary(binary), "session", "--ndjson", *options]


def cell_request(request_id: int, code: str, *, timeout: float | str | None,
                 files: FileSpec | None, streaming: Streaming) -> dict[str, Any]:
    """One request line's object; ``"stream": true`` only when a callback wants the output."""
    request: dict[str, Any] = {"id": request_id, "code": code}
    if timeout is not None:
        request["timeout"] = _process.duration(timeout)
    if files:
        request["files"] = _file_entries(files)
    if streaming:
        request["stream"] = True
    return request


def checked_cell(result: Result, request_id: int) -> CellResult:
    """``result`` as the answer to ``request_id``; SandboxError when it answers another."""
    assert isinstance(result, CellResult)
    if result.id != request_id:
        raise SandboxError(f"pysandbox session answered request {result.id!r}, not "
                           f"{request_id!r}", result=result)
    return result


class Session:
    """A sandboxed Python interpreter whose variables, imports and files in /tmp/work survive
    from one cell to the next (``pysandbox session --ndjson``)::

        with pysandbox.Session(profile="datascience") as session:
            session.run("import pandas as pd\\ndf = pd.DataFrame({'a': [1, 2]})")
            print(session.run("df.a.sum()").value)          # 3
            session.run("df.to_csv('a.csv')")
            print(session.read_file("a.csv"))               # b',a\\n0,1\\n1,2\\n'

    Each :meth:`run` writes one request and reads its response (and, when it streams, the
    output events before it). A cell that raises, times out or is killed is a
    :class:`CellResult` whose ``state`` says whether the interpreter survived (after a kill a
    new sandbox serves the next cell, with nothing kept); only pysandbox's own failures raise
    :class:`SandboxError`. :meth:`close` (or leaving the ``with`` block) ends the session and
    leaves nothing running. An interrupt while a cell runs (KeyboardInterrupt, or an exception
    from a callback) ends the session at once, as SIGTERM ends ``pysandbox session``: the
    sandbox is killed, and the session is closed.

    Args:
        profile: a profile name or file, as for :func:`pysandbox.run`.
        timeout: the longest a cell may run (``--timeout``); the profile's when None.
        inputs, env, net, kernel: as for :func:`pysandbox.run`, for the whole session (on
            gVisor, one warm gVisor sandbox serves the cells).
        idle_timeout: end the session when no cell came for this long (``--idle-timeout``).
        lifetime: end the session this long after it started (``--lifetime``).
        output_dir: a host directory, empty or absent, into which pysandbox copies what each
            cell made or changed under /tmp/work, as ``DIR/cell-N`` (``--output-dir``).
        on_stdout, on_stderr: called with each piece of a cell's output, as text, while it
            runs (every cell's, unless its own run() names others); the cell's result holds all
            of it too. A cell is asked to stream (``"stream": true``) only when one is given.
        binary: the pysandbox executable; else ``$PYSANDBOX_BINARY``, else ``pysandbox`` on PATH.
        extra_args: other options of ``pysandbox session`` (``["--memory", "256MiB"]``).

    Raises:
        SandboxError: the binary could not be started.
    """

    def __init__(self, *, profile: StrPath | None = None, timeout: float | str | None = None,
                 inputs: Iterable[InputSpec] = (), env: EnvSpec = (), net: str | None = None,
                 kernel: str | None = None,
                 idle_timeout: float | str | None = None, lifetime: float | str | None = None,
                 output_dir: StrPath | None = None, on_stdout: OutputCallback | None = None,
                 on_stderr: OutputCallback | None = None, binary: StrPath | None = None,
                 extra_args: Sequence[str] = ()) -> None:
        argv = session_argv(profile=profile, timeout=timeout, inputs=inputs, env=env, net=net,
                            kernel=kernel,
                            idle_timeout=idle_timeout, lifetime=lifetime, output_dir=output_dir,
                            binary=binary, extra_args=extra_args)
        self._streaming = Streaming(on_stdout, on_stderr)
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
            files: FileSpec | None = None, on_stdout: OutputCallback | None = None,
            on_stderr: OutputCallback | None = None) -> CellResult:
        """Run one cell in the session's interpreter and return how it ended.

        Args:
            code: the cell's text; the repr of a final expression statement is the result's
                ``value``, as a REPL shows it.
            timeout: this cell's wall-clock limit (at most the session's); when it is reached
                the cell gets a KeyboardInterrupt and the state is kept, or, if it does not
                stop, the sandbox is killed and the state is lost.
            files: files to place in /tmp/work before the cell runs (name to text or bytes).
            on_stdout, on_stderr: this cell's output callbacks, instead of the session's.

        Raises:
            SandboxError: the session is closed, or pysandbox failed: it refused to start (a
                bad option or profile; its message), or it ended or answered out of turn.
        """
        streaming = Streaming(on_stdout, on_stderr) if on_stdout or on_stderr \
            else self._streaming
        return self._cell(code, timeout=timeout, files=files, streaming=streaming)

    def _cell(self, code: str, *, timeout: float | str | None = None,
              files: FileSpec | None = None, streaming: Streaming = Streaming()) -> CellResult:
        request = cell_request(self._next_id, code, timeout=timeout, files=files,
                               streaming=streaming)
        self._next_id += 1
        return self._exchange(request, streaming)

    def read_file(self, path: str, *, max_bytes: int = _files.READ_LIMIT) -> bytes:
        """The content of the file at ``path`` inside the sandbox (relative to the
        interpreter's working directory, /tmp/work unless the session's code changed it), read
        by a cell that the driver runs: what the session's code sees, never a host copy.

        Raises:
            FileNotFoundError, IsADirectoryError, PermissionError: as opening it in the sandbox
                raised them.
            ValueError: the file is larger than ``max_bytes`` (4 MiB by default).
            SandboxError: the answer did not arrive whole: its base64 (a third more than the
                file) went over the profile's output limit, whose first half passes (8 MiB of
                the default 16 MiB, 512 KiB of ``strict``'s 1 MiB), or the session failed.
        """
        result = self._cell(_files.read_cell(path, max_bytes))
        return _files.received(result, f"read_file({path!r})")

    def list_files(self, path: str = "/tmp/work", *,
                   max_entries: int = _files.LIST_LIMIT) -> list[FileInfo]:
        """Every entry under the directory ``path`` inside the sandbox (recursively, symbolic
        links not followed), as the session's code sees it, listed by a cell the driver runs.

        Raises:
            FileNotFoundError, NotADirectoryError, PermissionError: as listing it raised them.
            ValueError: more than ``max_entries`` entries.
            SandboxError: as for :meth:`read_file`.
        """
        result = self._cell(_files.list_cell(path, max_entries))
        return _files.file_infos(_files.received(result, f"list_files({path!r})"))

    def _exchange(self, request: Mapping[str, Any], streaming: Streaming) -> CellResult:
        stdin, stdout = self._process.stdin, self._process.stdout
        if stdin is None or stdout is None or stdin.closed:
            raise SandboxError("the session is closed")
        try:
            stdin.write(json.dumps(request).encode("utf-8") + b"\n")
            stdin.flush()
        except BrokenPipeError:
            pass  # the process is gone: reading says why
        reader = CellReader(request["id"], streaming, CellResult)
        try:
            while True:
                line = stdout.readline()
                if not line:
                    raise self._ended()
                result, callback, text = reader.feed(line)
                if result is not None:
                    break
                if callback is not None:
                    callback(text)
        except BaseException:
            self._interrupt()
            raise
        if _process.is_refusal(result):
            self.close()
            raise SandboxError(result.message or self._stderr_text() or "session refused",
                               returncode=self._process.returncode, stderr=self._stderr_text(),
                               result=result)
        return checked_cell(result, request["id"])

    def _interrupt(self) -> None:
        """A cell was interrupted: the session ends now, not when the cell would have."""
        _process.stop(self._process, _process.STOP_GRACE_SECONDS)
        self.close()

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
