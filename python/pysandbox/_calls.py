"""What the sync and the async API share, free of any I/O of their own: the command line and
input of a ``run()``, reading a session's lines (interim output events, then the result), the
output directory of a run, and how a call that is interrupted stops pysandbox.

``run()`` needs the value of a final expression, which only pysandbox's cell driver reports: so
a run is one job of ``pysandbox batch`` (as ``pysandbox.dask`` runs its jobs), or, when its
output is wanted as it comes, the one cell of a ``pysandbox session`` that asks to stream.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _process
from ._batch import batch_options
from ._errors import SandboxError
from ._process import EnvSpec, InputSpec, StrPath
from ._result import Result, Status

OutputCallback = Callable[[str], object]
"""Called with each piece of the script's output (stdout or stderr) as it arrives."""


@dataclass(frozen=True)
class Streaming:
    """The callbacks of one call; streaming is asked for only when one is given."""

    on_stdout: OutputCallback | None = None
    on_stderr: OutputCallback | None = None

    def __bool__(self) -> bool:
        return self.on_stdout is not None or self.on_stderr is not None

    def callback(self, event: str) -> OutputCallback | None:
        return self.on_stdout if event == "stdout" else self.on_stderr


class OutputDir:
    """``output_dir=`` of a run: pysandbox copies a batch job's files into DIR/job-1 and a
    session cell's into DIR/cell-1, so the run writes into an empty staging directory beside
    DIR and :meth:`finish` renames that one subdirectory to DIR. DIR must be empty or absent,
    as for ``pysandbox run --output-dir``."""

    def __init__(self, target: StrPath) -> None:
        self.target = Path(os.path.abspath(target))
        if self.target.exists() and (not self.target.is_dir() or any(self.target.iterdir())):
            raise SandboxError(f"output directory {self.target} is not an empty directory "
                               f"(it must be empty or absent, so that no artifact lands where "
                               f"something else picks it up)")
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.staging = Path(tempfile.mkdtemp(prefix=".pysandbox-output-",
                                             dir=self.target.parent))

    def finish(self, result: Result) -> Result:
        """Moves what pysandbox copied into the target, removes the staging directory, and
        returns ``result`` with its artifacts' ``host_path`` in the target."""
        made = list(self.staging.iterdir())
        try:
            if made:
                if self.target.is_dir():
                    self.target.rmdir()  # empty, as checked: the rename takes its place
                os.rename(made[0], self.target)
            else:
                self.target.mkdir(exist_ok=True)
        except OSError as e:
            raise SandboxError(f"the run's files stay in {made[0] if made else self.staging}: "
                               f"they could not become {self.target} ({e})") from None
        self.discard()
        if not made or not result.files:
            return result
        raw = dict(result.raw)
        raw["files"] = [self._moved(dict(entry), made[0]) for entry in raw.get("files", [])]
        return type(result).from_json(raw)

    def _moved(self, entry: dict[str, Any], made: Path) -> dict[str, Any]:
        host_path = entry.get("host_path")
        if isinstance(host_path, str) and Path(host_path).is_relative_to(made):
            entry["host_path"] = str(self.target / Path(host_path).relative_to(made))
        return entry

    def discard(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


@dataclass
class RunCall:
    """One ``run()`` as pysandbox gets it: ``argv``, the bytes for its stdin, and whether it is
    a session (whose lines :class:`CellReader` reads) or a batch of one job."""

    argv: list[str]
    stdin: bytes
    session: bool
    streaming: Streaming
    output_dir: OutputDir | None

    def finish(self, result: Result) -> Result:
        """``result``, once the output directory holds what the run copied."""
        return result if self.output_dir is None else self.output_dir.finish(result)

    def abandon(self) -> None:
        """After a failure or an interrupt: the staging directory goes, the target stays."""
        if self.output_dir is not None:
            self.output_dir.discard()


def _script_text(script: StrPath) -> str:
    try:
        with open(script, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise SandboxError(f"cannot read the script {os.fspath(script)}: {e}") from None


def plan_run(*, code: str | None, script: StrPath | None, profile: StrPath | None,
             timeout: float | str | None, inputs: Iterable[InputSpec], args: Sequence[str],
             stdin: bytes | str | None, env: EnvSpec, net: str | None, kernel: str | None,
             output_dir: StrPath | None,
             binary: StrPath | None, extra_args: Sequence[str], streaming: Streaming) -> RunCall:
    """The call that runs ``code`` (or ``script``) as ``run()`` documents. Raises TypeError for
    arguments that do not fit, before anything starts."""
    if (code is None) == (script is None):
        raise TypeError("run() takes the code to run or a script=, exactly one of them")
    if isinstance(args, str):
        raise TypeError("args is a list of arguments, not one string")
    if isinstance(stdin, bytes):
        try:
            stdin = stdin.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("stdin must be UTF-8 text (a run's stdin travels in a JSON "
                             "line)") from None
    if streaming and (args or stdin):
        raise TypeError("on_stdout/on_stderr run the code as a session's cell, which has no "
                        "args or stdin")
    binary_path = _process.find_binary(binary)
    if streaming:
        text = code if code is not None else _script_text(script)  # type: ignore[arg-type]
        options = _process.run_options(profile=profile, timeout=timeout, inputs=inputs, env=env,
                                       net=net, kernel=kernel, extra_args=extra_args)
        argv = [binary_path, "session", "--ndjson", *options]
        line = json.dumps({"id": 1, "code": text, "stream": True})
    else:
        profiles = [_process.profile_argument(profile)] if profile is not None else []
        options = batch_options(jobs_at_once=1, profiles=profiles, timeout=timeout, env=env,
                                net=net, kernel=kernel, extra_args=extra_args)
        # No preload: a run starts the plain interpreter, as `pysandbox run` does.
        argv = [binary_path, "batch", "--no-preload", *options]
        line = json.dumps(_job(code, script, args, stdin, inputs))
    staging = OutputDir(output_dir) if output_dir is not None else None
    if staging is not None:
        argv += ["--output-dir", str(staging.staging)]
    if not streaming:
        argv.append("-")  # the job on stdin
    return RunCall(argv, line.encode("utf-8") + b"\n", bool(streaming), streaming, staging)


def _job(code: str | None, script: StrPath | None, args: Sequence[str], stdin: str | None,
         inputs: Iterable[InputSpec]) -> dict[str, Any]:
    """The batch job of a run (its id null, as a run has none)."""
    job: dict[str, Any] = {"id": None}
    if code is not None:
        job["code"] = code
    elif script is not None:
        job["script"] = os.path.abspath(script)
    if args:
        job["args"] = list(args)
    if stdin:
        job["stdin"] = stdin
    if files := [_process.input_argument(spec, absolute=True) for spec in inputs]:
        job["inputs"] = files
    return job


def batch_result(returncode: int, stdout: bytes, stderr: str) -> Result:
    """The result of a batch of one job; a batch that refuses to start prints no result, only
    its message, which the SandboxError carries."""
    lines = stdout.splitlines()
    if not lines and returncode == 125 and stderr.startswith("pysandbox: "):
        message = stderr.splitlines()[0].removeprefix("pysandbox: ")
        raise SandboxError(message, returncode=returncode, stderr=stderr)
    return checked_run_result(_process.single_result_of(returncode, lines, stderr), returncode,
                              stderr)


def one_cell_result(result: Result | None, returncode: int | None, stderr: str) -> Result:
    """What a one-cell ``pysandbox session`` answered (``run()`` of code), checked as
    :func:`checked_run_result`; a SandboxError when it ended without a result."""
    if result is None:
        raise SandboxError(f"pysandbox session ended (exit status {returncode}) without "
                           f"a result: {stderr.strip()[-2000:] or 'no message'}",
                           returncode=returncode, stderr=stderr)
    return checked_run_result(result, returncode, stderr)


def checked_run_result(result: Result, returncode: int | None, stderr: str) -> Result:
    """``result``, unless it says that pysandbox could not take the request (a script or an
    input it could not read): that is a SandboxError, as a refused ``pysandbox run`` is."""
    if result.status is Status.BAD_REQUEST or _process.is_refusal(result):
        raise SandboxError(result.message or stderr or "pysandbox refused the run",
                           returncode=returncode, stderr=stderr, result=result)
    return result


class CellReader:
    """Reads the lines a session prints for one request: output events (``{"id", "event":
    "stdout"|"stderr", "data"}``, when the request asked to stream) go to their callbacks; the
    result line ends the cell. ``feed`` returns None until the result came."""

    def __init__(self, request_id: Any, streaming: Streaming,
                 result_type: type[Result] = Result) -> None:
        self.request_id = request_id
        self.streaming = streaming
        self.result_type = result_type

    def feed(self, line: bytes) -> tuple[Result | None, OutputCallback | None, str]:
        """The result, if ``line`` holds it; else the callback to call and its text (a None
        callback: nothing to call)."""
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise SandboxError(f"pysandbox session printed a line that is not JSON ({e}): "
                               f"{line!r:.200}") from None
        if isinstance(obj, Mapping) and "event" in obj and "schema" not in obj:
            return None, *self._event(obj)
        return self.result_type.from_json(obj), None, ""

    def _event(self, obj: Mapping[str, Any]) -> tuple[OutputCallback | None, str]:
        event, data = obj.get("event"), obj.get("data")
        if obj.get("id") != self.request_id or event not in ("stdout", "stderr") or \
                not isinstance(data, str):
            raise SandboxError(f"pysandbox session printed an output event that is not one "
                               f"of request {self.request_id!r}: {dict(obj)!r:.200}")
        return self.streaming.callback(event), data
