"""The asyncio API: ``arun``, ``AsyncSession`` and ``abatch``, on asyncio subprocesses, each the
counterpart of ``run``, ``Session`` and ``batch`` with the same arguments and results.

Cancelling the awaiting task (``task.cancel()``, ``asyncio.timeout``, ``wait_for``) stops the
call as an interrupt stops the sync one: pysandbox gets SIGTERM, on which it kills its sandboxes
and removes what it made, and SIGKILL if it has not ended within a grace period; the task
awaits that before the cancellation propagates, so nothing of the call outlives it. A cancelled
cell ends its session (the protocol has no way to interrupt one cell and keep the rest).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import tempfile
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping, Sequence
from types import TracebackType
from typing import IO, Any

from . import _files, _process
from . import _session as _session_module
from ._batch import JobSpec, batch_options, check_exit, job_line
from ._calls import CellReader, OutputCallback, RunCall, Streaming
from ._calls import batch_result, one_cell_result, plan_run
from ._errors import SandboxError
from ._files import FileInfo
from ._process import EnvSpec, InputSpec, StrPath
from ._result import Result, Status
from ._session import CellResult, FileSpec, cell_request, checked_cell, session_argv

# The longest line read from pysandbox: a result holds up to the output limit (16 MiB by
# default, as base64 a third more) and a cell's figures (16 MiB).
_LINE_LIMIT = 1 << 28


async def _start(argv: Sequence[str], stderr: IO[bytes] | int) -> asyncio.subprocess.Process:
    try:
        return await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=stderr, limit=_LINE_LIMIT)
    except OSError as e:
        raise SandboxError(f"cannot run {argv[0]}: {e}") from None


async def _stop(process: asyncio.subprocess.Process,
                grace: float = _process.STOP_GRACE_SECONDS) -> None:
    """_process.stop for an asyncio process. Shielded: a second cancellation does not leave
    the process running, the stop goes on."""

    async def stop() -> None:
        if process.returncode is not None:
            return
        try:
            process.terminate()
            await asyncio.wait_for(process.wait(), grace)
        except ProcessLookupError:
            pass
        except TimeoutError:
            process.kill()
            await process.wait()

    await asyncio.shield(asyncio.ensure_future(stop()))


async def _call(callback: OutputCallback | None, text: str) -> None:
    if callback is not None:
        returned = callback(text)
        if inspect.isawaitable(returned):
            await returned


async def _write_and_close(process: asyncio.subprocess.Process, data: bytes) -> None:
    assert process.stdin is not None
    try:
        process.stdin.write(data)
        await process.stdin.drain()
        process.stdin.close()
    except (BrokenPipeError, ConnectionResetError):
        pass  # it ended at once: its exit status and stderr say why


async def arun(code: str | None = None, *, script: StrPath | None = None,
               profile: StrPath | None = None, timeout: float | str | None = None,
               inputs: Iterable[InputSpec] = (), args: Sequence[str] = (),
               stdin: bytes | str | None = None, env: EnvSpec = (), net: str | None = None,
               kernel: str | None = None,
               output_dir: StrPath | None = None, on_stdout: OutputCallback | None = None,
               on_stderr: OutputCallback | None = None, binary: StrPath | None = None,
               extra_args: Sequence[str] = ()) -> Result:
    """:func:`pysandbox.run` for asyncio: the same arguments, the same result::

        result = await pysandbox.arun("sum(range(10))", timeout=2)   # result.value == '45'

    The callbacks may be plain functions or coroutine functions (awaited in turn). Cancelling
    the task stops pysandbox (SIGTERM, then SIGKILL after a grace period) and returns once it
    has ended, its sandbox with it.
    """
    call = plan_run(code=code, script=script, profile=profile, timeout=timeout, inputs=inputs,
                    args=args, stdin=stdin, env=env, net=net, kernel=kernel, output_dir=output_dir,
                    binary=binary, extra_args=extra_args,
                    streaming=Streaming(on_stdout, on_stderr))
    try:
        result = await (_session_cell(call) if call.session else _batch_job(call))
    except BaseException:
        call.abandon()
        raise
    return call.finish(result)


async def _batch_job(call: RunCall) -> Result:
    process = await _start(call.argv, asyncio.subprocess.PIPE)
    try:
        stdout, stderr = await process.communicate(call.stdin)
    finally:
        await _stop(process)
    assert process.returncode is not None
    return batch_result(process.returncode, stdout, stderr.decode("utf-8", "replace"))


async def _session_cell(call: RunCall) -> Result:
    with tempfile.TemporaryFile() as stderr:
        process = await _start(call.argv, stderr)
        assert process.stdout is not None
        reader = CellReader(1, call.streaming)
        result: Result | None = None
        try:
            await _write_and_close(process, call.stdin)
            while line := await process.stdout.readline():
                result, callback, text = reader.feed(line)
                if result is not None:
                    break
                await _call(callback, text)
            await process.wait()
        finally:
            await _stop(process)
        stderr.seek(0)
        said = stderr.read().decode("utf-8", "replace")
    return one_cell_result(result, process.returncode, said)


class AsyncSession:
    """:class:`pysandbox.Session` for asyncio, with the same arguments::

        async with pysandbox.AsyncSession(on_stdout=print) as session:
            await session.run("import time\\nfor i in range(3):\\n    print(i); time.sleep(1)")
            print((await session.run("i * 10")).value)          # 20

    The process starts in ``async with`` (or :meth:`start`, or the first cell). Cells run one
    at a time, in the order they were awaited. Cancelling a cell's task ends the session at
    once, as a KeyboardInterrupt ends a :class:`Session`: SIGTERM, then SIGKILL after a grace
    period; the session is closed and its sandbox gone when the cancellation propagates.
    """

    def __init__(self, *, profile: StrPath | None = None, timeout: float | str | None = None,
                 inputs: Iterable[InputSpec] = (), env: EnvSpec = (), net: str | None = None,
                 kernel: str | None = None,
                 idle_timeout: float | str | None = None, lifetime: float | str | None = None,
                 output_dir: StrPath | None = None, on_stdout: OutputCallback | None = None,
                 on_stderr: OutputCallback | None = None, binary: StrPath | None = None,
                 extra_args: Sequence[str] = ()) -> None:
        self._argv = session_argv(profile=profile, timeout=timeout, inputs=inputs, env=env,
                                  net=net, kernel=kernel, idle_timeout=idle_timeout,
                                  lifetime=lifetime,
                                  output_dir=output_dir, binary=binary, extra_args=extra_args)
        self._streaming = Streaming(on_stdout, on_stderr)
        self._next_id = 1
        self._stderr: IO[bytes] = tempfile.TemporaryFile()
        self._process: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    async def start(self) -> AsyncSession:
        """Starts ``pysandbox session`` (once). Raises SandboxError when it cannot be."""
        if self._process is None:
            if self._closed:
                raise SandboxError("the session is closed")
            try:
                self._process = await _start(self._argv, self._stderr)
            except SandboxError:
                self._closed = True
                self._stderr.close()
                raise
        return self

    async def __aenter__(self) -> AsyncSession:
        return await self.start()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.close()

    @property
    def pid(self) -> int | None:
        """The process id of ``pysandbox session``, once started."""
        return None if self._process is None else self._process.pid

    @property
    def closed(self) -> bool:
        """Whether the session has ended (closed, or its process gone)."""
        return self._closed or (self._process is not None and
                                self._process.returncode is not None)

    async def run(self, code: str, *, timeout: float | str | None = None,
                  files: FileSpec | None = None, on_stdout: OutputCallback | None = None,
                  on_stderr: OutputCallback | None = None) -> CellResult:
        """:meth:`pysandbox.Session.run`: one cell, its result. The callbacks may be plain
        functions or coroutine functions."""
        streaming = Streaming(on_stdout, on_stderr) if on_stdout or on_stderr \
            else self._streaming
        return await self._cell(code, timeout=timeout, files=files, streaming=streaming)

    async def read_file(self, path: str, *, max_bytes: int = _files.READ_LIMIT) -> bytes:
        """:meth:`pysandbox.Session.read_file`: a file inside the sandbox, read by a cell."""
        result = await self._cell(_files.read_cell(path, max_bytes))
        return _files.received(result, f"read_file({path!r})")

    async def list_files(self, path: str = "/tmp/work", *,
                         max_entries: int = _files.LIST_LIMIT) -> list[FileInfo]:
        """:meth:`pysandbox.Session.list_files`: the tree under a directory in the sandbox."""
        result = await self._cell(_files.list_cell(path, max_entries))
        return _files.file_infos(_files.received(result, f"list_files({path!r})"))

    async def _cell(self, code: str, *, timeout: float | str | None = None,
                    files: FileSpec | None = None,
                    streaming: Streaming = Streaming()) -> CellResult:
        async with self._lock:
            if self._closed:
                raise SandboxError("the session is closed")
            await self.start()
            request = cell_request(self._next_id, code, timeout=timeout, files=files,
                                   streaming=streaming)
            self._next_id += 1
            try:
                return await self._exchange(request, streaming)
            except BaseException:
                await self._interrupt()
                raise

    async def _exchange(self, request: Mapping[str, Any], streaming: Streaming) -> CellResult:
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(json.dumps(request).encode("utf-8") + b"\n")
            await process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the process is gone: reading says why
        reader = CellReader(request["id"], streaming, CellResult)
        while True:
            line = await process.stdout.readline()
            if not line:
                raise await self._ended()
            result, callback, text = reader.feed(line)
            if result is not None:
                break
            await _call(callback, text)
        if _process.is_refusal(result):
            await self.close()
            stderr = self._stderr_text()
            raise SandboxError(result.message or stderr or "session refused",
                               returncode=process.returncode, stderr=stderr, result=result)
        return checked_cell(result, request["id"])

    async def _interrupt(self) -> None:
        if self._process is not None:
            await _stop(self._process)
        await self.close()

    def _stderr_text(self) -> str:
        if self._stderr.closed:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace").strip()

    async def _ended(self) -> SandboxError:
        stderr = self._stderr_text()
        await self.close()
        code = None if self._process is None else self._process.returncode
        said = stderr[-2000:] if stderr else "no message"
        return SandboxError(f"pysandbox session ended (exit status {code}): {said}",
                            returncode=code, stderr=stderr)

    async def close(self) -> None:
        """:meth:`pysandbox.Session.close`: stdin closed, a moment to end, then a kill.
        Closing twice is harmless."""
        self._closed = True
        process = self._process
        if process is not None and process.returncode is None:
            await asyncio.shield(asyncio.ensure_future(_end(process)))


async def _end(process: asyncio.subprocess.Process) -> None:
    """A session's end: stdin closed, so that it ends once the cell running is answered; killed
    if it has not within the grace period."""
    assert process.stdin is not None
    process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), _session_module._CLOSE_GRACE_SECONDS)
    except TimeoutError:
        process.kill()
        await process.wait()


async def abatch(jobs: Iterable[JobSpec] | AsyncIterable[JobSpec], *,
                 jobs_at_once: int | None = None, profiles: Iterable[str] = (),
                 keep_order: bool = False, fork: bool = False,
                 timeout: float | str | None = None, env: EnvSpec = (), net: str | None = None,
                 kernel: str | None = None,
                 output_dir: StrPath | None = None, binary: StrPath | None = None,
                 extra_args: Sequence[str] = ()) -> AsyncIterator[Result]:
    """:func:`pysandbox.batch` for asyncio: yields each job's result as it comes::

        async with contextlib.aclosing(pysandbox.abatch(jobs, timeout=2)) as results:
            async for result in results:
                print(result.id, result.status)

    ``jobs`` may be an async iterable; it is written by a task of its own while results are
    read (a plain iterable is read in the event loop: a slow one belongs in an async one).
    Leaving early (``aclose()``, ``aclosing``) or cancelling the consuming task stops the batch
    as an interrupt does: SIGTERM, on which pysandbox kills the jobs running, then SIGKILL
    after a grace period.
    """
    options = batch_options(jobs_at_once=jobs_at_once, profiles=profiles, keep_order=keep_order,
                            fork=fork, timeout=timeout, env=env, net=net, kernel=kernel,
                            output_dir=output_dir,
                            extra_args=extra_args)
    argv = [_process.find_binary(binary), "batch", *options, "-"]
    with tempfile.TemporaryFile() as stderr:
        process = await _start(argv, stderr)
        assert process.stdout is not None
        feeder = asyncio.ensure_future(_feed(jobs, process))
        setup_failed = False
        try:
            while line := await process.stdout.readline():
                result = _process.parse_result_line(line)
                setup_failed |= result.status is Status.SANDBOX_ERROR
                yield result
            await process.wait()
        finally:
            await _stop(process)
            if not feeder.done():
                feeder.cancel()
            await asyncio.gather(feeder, return_exceptions=True)
        if not feeder.cancelled() and feeder.exception() is not None:
            raise feeder.exception()  # type: ignore[misc]
        assert process.returncode is not None
        check_exit(process.returncode, setup_failed, stderr)


async def _feed(jobs: Iterable[JobSpec] | AsyncIterable[JobSpec],
                process: asyncio.subprocess.Process) -> None:
    """Writes the job lines to the batch's stdin, then closes it."""
    pipe = process.stdin
    assert pipe is not None
    position = 0
    try:
        if isinstance(jobs, AsyncIterable):
            async for job in jobs:
                pipe.write(job_line(job, position).encode("utf-8") + b"\n")
                position += 1
                await pipe.drain()
        else:
            for job in jobs:
                pipe.write(job_line(job, position).encode("utf-8") + b"\n")
                position += 1
                await pipe.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the batch ended early; its exit status says why
    finally:
        pipe.close()
