"""``batch()``: many jobs through one ``pysandbox batch -``, N at a time, from warm sandboxes."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, NoReturn, Union

from . import _process
from ._errors import SandboxError
from ._process import EnvSpec, StrPath
from ._result import Result, Status


@dataclass(frozen=True)
class Job:
    """One job of a batch, as ``pysandbox batch`` reads it (see BATCH in pysandbox(1)).

    Exactly one of ``code`` and ``script`` (a host file) is the program. ``timeout`` is in
    seconds or a duration string (``"500ms"``), at most the profile's limit; ``profile`` must be
    one the batch allows; ``inputs`` are host files (``"FILE"`` or ``"FILE=NAME"``) placed in
    /tmp/work; ``requirements`` are pip requirement specifiers the job needs besides the
    profile's, installed (once) inside a sandbox by the batch (a result of status
    ``install_error`` when they cannot be)."""

    code: str | None = None
    script: StrPath | None = None
    id: Any = None
    args: Sequence[str] = ()
    stdin: str | None = None
    timeout: float | str | None = None
    profile: str | None = None
    inputs: Sequence[str] = ()
    requirements: Sequence[str] = ()

    def to_json(self) -> dict[str, Any]:
        """The job as the JSON object ``pysandbox batch`` reads (unset fields left out)."""
        obj: dict[str, Any] = {}
        if self.id is not None:
            obj["id"] = self.id
        if self.code is not None:
            obj["code"] = self.code
        if self.script is not None:
            obj["script"] = os.path.abspath(self.script)
        if self.args:
            obj["args"] = list(self.args)
        if self.stdin is not None:
            obj["stdin"] = self.stdin
        if self.timeout is not None:
            obj["timeout"] = _process.duration(self.timeout)
        if self.profile is not None:
            obj["profile"] = self.profile
        if self.inputs:
            obj["inputs"] = list(self.inputs)
        if self.requirements:
            obj["requirements"] = list(self.requirements)
        return obj


JobSpec = Union[Job, Mapping[str, Any], str]
"""A job: a :class:`Job`, a mapping with the same keys as its JSON, or a JSON line as is."""


def job_line(job: JobSpec, position: int) -> str:
    """The line ``pysandbox batch`` reads for ``job``; a job without an id gets ``position``
    (its place in the input, from 0) so that its result can be told apart. A string is sent as
    it is (one line: a bad one gets a ``bad_request`` result)."""
    if isinstance(job, str):
        if "\n" in job:
            raise ValueError(f"job {position} is a string of more than one line")
        return job
    obj = job.to_json() if isinstance(job, Job) else dict(job)
    obj.setdefault("id", position)
    return json.dumps(obj)


def batch_options(*, jobs_at_once: int | None = None, profiles: Iterable[str] = (),
                  keep_order: bool = False, fork: bool = False,
                  timeout: float | str | None = None, env: EnvSpec = (), net: str | None = None,
                  kernel: str | None = None,
                  output_dir: StrPath | None = None, extra_args: Sequence[str] = ()) -> list[str]:
    """The options of ``pysandbox batch`` these arguments stand for."""
    if isinstance(profiles, str):
        raise TypeError("profiles is a list of profile names, not one string")
    options: list[str] = []
    if jobs_at_once is not None:
        options += ["--jobs", str(jobs_at_once)]
    for profile in profiles:
        options += ["--profile", profile]
    if keep_order:
        options.append("--keep-order")
    if fork:
        options.append("--fork")
    if output_dir is not None:
        options += ["--output-dir", os.path.abspath(output_dir)]
    return options + _process.run_options(timeout=timeout, env=env, net=net, kernel=kernel,
                                          extra_args=extra_args)


class _Feeder(threading.Thread):
    """Writes the job lines to the batch's stdin while its results are read, then closes it."""

    def __init__(self, jobs: Iterable[JobSpec], pipe: IO[bytes]) -> None:
        super().__init__(name="pysandbox-batch-feeder", daemon=True)
        self.jobs = jobs
        self.pipe = pipe
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for position, job in enumerate(self.jobs):
                self.pipe.write(job_line(job, position).encode("utf-8") + b"\n")
        except BrokenPipeError:
            pass  # the batch ended early; its exit status says why
        except BaseException as e:  # noqa: BLE001  (re-raised in the reading thread)
            self.error = e
        finally:
            try:
                self.pipe.close()
            except BrokenPipeError:
                pass


def batch(jobs: Iterable[JobSpec], *, jobs_at_once: int | None = None,
          profiles: Iterable[str] = (), keep_order: bool = False, fork: bool = False,
          timeout: float | str | None = None, env: EnvSpec = (), net: str | None = None,
          kernel: str | None = None,
          output_dir: StrPath | None = None, binary: StrPath | None = None,
          extra_args: Sequence[str] = ()) -> Iterator[Result]:
    """Run many jobs, each in a sandbox of its own, and yield their results
    (``pysandbox batch -``)::

        jobs = ({"id": n, "code": f"print({n} ** 2)"} for n in range(1000))
        for result in pysandbox.batch(jobs, timeout=2):
            print(result.id, result.status, result.stdout, end="")

    ``jobs`` is read lazily by a thread of its own while results come back, so it may be a
    generator of any length. Each result carries its job's ``id`` (a job without one gets its
    position in ``jobs``, from 0). A job that is not one (a missing program, an unknown field,
    a profile the batch does not allow, a line that is not JSON) gets a result with status
    ``bad_request``; the batch goes on. Leaving the loop early (or an interrupt) stops the
    batch: SIGTERM, on which pysandbox kills the jobs running, then SIGKILL after a grace
    period.

    Args:
        jobs: :class:`Job` objects, mappings with a job's JSON keys, or JSON lines as they are.
        jobs_at_once: how many run at once (``-j``); one per CPU when None.
        profiles: the profiles jobs may name; the first is the default (``"default"`` when
            empty).
        keep_order: yield results in the jobs' order instead of as they finish.
        fork: fork each job's sandbox from a warm one that has imported the profile's preload
            (``--fork``): several times the jobs per second, at the costs BATCH in
            ``pysandbox(1)`` lists (no cgroup of its own; up to 256 jobs share a memory layout).
            Not on gVisor: pysandbox refuses it there (SandboxError).
        timeout: every job's wall-clock limit unless the job sets its own.
        env, net, kernel: as for :func:`pysandbox.run`, for every job.
        output_dir: a host directory, empty or absent, into which pysandbox copies the files
            each job made, as ``DIR/job-N`` (N: the job's line, from 1; ``--output-dir``).
        binary: the pysandbox executable; else ``$PYSANDBOX_BINARY``, else ``pysandbox`` on PATH.
        extra_args: other options of ``pysandbox batch`` (``["--memory", "256MiB"]``).

    Raises:
        SandboxError: pysandbox could not be started, or failed before or without reporting
            every job (a bad option or profile: its message; killed by a signal).
    """
    options = batch_options(jobs_at_once=jobs_at_once, profiles=profiles, keep_order=keep_order,
                            fork=fork, timeout=timeout, env=env, net=net, kernel=kernel,
                            output_dir=output_dir,
                            extra_args=extra_args)
    argv = [_process.find_binary(binary), "batch", *options, "-"]
    with tempfile.TemporaryFile() as stderr:
        try:
            process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=stderr)
        except OSError as e:
            raise SandboxError(f"cannot run {argv[0]}: {e}") from None
        assert process.stdin is not None and process.stdout is not None
        feeder = _Feeder(jobs, process.stdin)
        setup_failed = False
        try:
            feeder.start()
            for line in process.stdout:
                result = _process.parse_result_line(line)
                setup_failed |= result.status is Status.SANDBOX_ERROR
                yield result
            process.wait()
        finally:
            # The caller left early, was interrupted, or parsing failed.
            _process.stop(process, _process.STOP_GRACE_SECONDS)
            process.stdout.close()
            feeder.join()
        if feeder.error is not None:
            raise feeder.error
        check_exit(process.returncode, setup_failed, stderr)


def check_exit(returncode: int, setup_failed: bool, stderr: IO[bytes]) -> None:
    """Raises SandboxError unless the batch's exit status says that every job ran: 0, or 125
    after a sandbox_error result (a job's sandbox could not be set up, which its result
    says). Anything else is pysandbox's own failure."""
    if returncode != 0 and not (returncode == 125 and setup_failed):
        _fail(returncode, stderr)


def _fail(returncode: int, stderr: IO[bytes]) -> NoReturn:
    stderr.seek(0)
    text = stderr.read().decode("utf-8", "replace").strip()
    said = text[-2000:] if text else "no message"
    raise SandboxError(f"pysandbox batch failed (exit status {returncode}): {said}",
                       returncode=returncode, stderr=text)
