"""``run()``: one request, one fresh sandbox, one result."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from typing import IO

from . import _process
from ._calls import CellReader, OutputCallback, RunCall, Streaming
from ._calls import batch_result, one_cell_result, plan_run
from ._errors import SandboxError
from ._process import EnvSpec, InputSpec, StrPath
from ._result import Result


def run(code: str | None = None, *, script: StrPath | None = None,
        profile: StrPath | None = None, timeout: float | str | None = None,
        inputs: Iterable[InputSpec] = (), args: Sequence[str] = (),
        stdin: bytes | str | None = None, env: EnvSpec = (), net: str | None = None,
        kernel: str | None = None,
        output_dir: StrPath | None = None, on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None, binary: StrPath | None = None,
        extra_args: Sequence[str] = ()) -> Result:
    """Run Python code in a new sandbox and return how it ended, with the repr of a final
    expression as the result's ``value`` (as sessions, batch and MCP report it)::

        pysandbox.run("import math\nmath.factorial(20)").value    # '2432902008176640000'

    The code runs as a cell of pysandbox's driver, which is what reports that value: as one job
    of ``pysandbox batch``, or, with ``on_stdout``/``on_stderr``, as the one cell of a
    ``pysandbox session`` that streams its output. Either way it is a fresh sandbox of its own,
    with the layers and limits of ``pysandbox run``, and nothing of it is left afterwards.

    Args:
        code: the program's text (up to 16 MiB).
        script: a file holding the program, instead of ``code``.
        profile: a profile name (``"strict"``, ``"datascience"``) or a profile file's path;
            pysandbox's default profile when None.
        timeout: the wall-clock limit, in seconds or as pysandbox writes durations
            (``"500ms"``); the profile's when None.
        inputs: files to place read-only in the script's working directory, each a path or a
            ``(path, name)`` pair.
        args: the script's arguments (``sys.argv[1:]``), passed verbatim.
        stdin: the script's standard input (UTF-8 text, as str or bytes); empty when None.
        env: environment variables for the script: a mapping, or ``"NAME"`` (from this
            process's environment) and ``"NAME=VALUE"`` strings.
        net: the network mode (``"none"``, ``"loopback"``, ``"proxy"``); the profile's when None.
        kernel: which kernel answers the code's system calls (``--kernel``): ``"gvisor"``
            (gVisor's runsc, a kernel in user space, in between; the result's
            ``enforcement.kernel`` says so) or ``"host"``; the profile's ``sandbox.kernel``
            when None.
        output_dir: a host directory, empty or absent, that receives a copy of the files the
            code made in /tmp/work (``--output-dir``; ``result.files`` lists them).
        on_stdout, on_stderr: called with each piece of the script's output, as text, while it
            runs (the result holds all of it too). Then the code is a session's cell, which
            has no ``args`` or ``stdin``, and a script's text is sent as the cell's code. An
            exception a callback raises stops the run and propagates.
        binary: the pysandbox executable; else ``$PYSANDBOX_BINARY``, else ``pysandbox`` on PATH.
        extra_args: other options, those that ``pysandbox batch`` (or, with a callback,
            ``pysandbox session``) shares with ``run`` (``["--memory", "64MiB"]``).

    Returns:
        The result, whatever the code did: an exception, a timeout, a denied system call, a
        sandbox that could not be set up are each a status of the result, never an exception.

    Raises:
        SandboxError: pysandbox itself failed: it could not be found or started, it refused the
            request before making a sandbox (a bad option or profile, a script or input it
            cannot read, user namespaces disabled; the message is pysandbox's), or it printed
            no result. Also when ``output_dir`` is not empty.
        TypeError: neither or both of ``code`` and ``script``, ``args`` or ``stdin`` with a
            callback, or an argument of the wrong type.
        ValueError: ``stdin`` is bytes that are not UTF-8.

    An interrupt (KeyboardInterrupt) while it runs stops pysandbox at once: SIGTERM, on which
    it kills the sandbox and removes what it made, then SIGKILL after a grace period.
    """
    call = plan_run(code=code, script=script, profile=profile, timeout=timeout, inputs=inputs,
                    args=args, stdin=stdin, env=env, net=net, kernel=kernel, output_dir=output_dir,
                    binary=binary, extra_args=extra_args,
                    streaming=Streaming(on_stdout, on_stderr))
    try:
        result = _run_session_cell(call) if call.session else _run_batch_job(call)
    except BaseException:
        call.abandon()
        raise
    return call.finish(result)


def _start(call: RunCall, stderr: IO[bytes] | int) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(call.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=stderr)
    except OSError as e:
        raise SandboxError(f"cannot run {call.argv[0]}: {e}") from None


def _run_batch_job(call: RunCall) -> Result:
    process = _start(call, subprocess.PIPE)
    try:
        stdout, stderr = process.communicate(call.stdin)
    finally:
        _process.stop(process, _process.STOP_GRACE_SECONDS)
    return batch_result(process.returncode, stdout, stderr.decode("utf-8", "replace"))


def _run_session_cell(call: RunCall) -> Result:
    with tempfile.TemporaryFile() as stderr:
        process = _start(call, stderr)
        assert process.stdin is not None and process.stdout is not None
        reader = CellReader(1, call.streaming)
        result: Result | None = None
        try:
            try:
                process.stdin.write(call.stdin)
                process.stdin.close()  # one cell: the session ends once it is answered
            except BrokenPipeError:
                pass  # it ended at once: its stderr says why
            for line in process.stdout:
                result, callback, text = reader.feed(line)
                if result is not None:
                    break
                if callback is not None:
                    callback(text)
            process.wait()
        finally:
            _process.stop(process, _process.STOP_GRACE_SECONDS)
            process.stdout.close()
        stderr.seek(0)
        said = stderr.read().decode("utf-8", "replace")
    return one_cell_result(result, process.returncode, said)
