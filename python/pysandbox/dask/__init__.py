"""Many machines: pysandbox jobs on a Dask cluster (Debian's ``python3-distributed``).

Each job is one Dask task, :func:`run_job`, that runs the worker's own ``pysandbox`` on it (a
``pysandbox batch`` of one job): the isolation is pysandbox's, the same on every host, and the
job's timeout is pysandbox's, not Dask's. The task is a pure function of the job (it reads and
writes nothing but the sandbox's output), so when a worker dies mid-job Dask runs the job again
elsewhere and no job is lost. Results are the JSON objects ``pysandbox batch`` prints, each with
a ``worker`` field naming the worker that ran it::

    from distributed import Client
    import pysandbox.dask

    client = Client("tcp://scheduler:8786")
    jobs = [{"id": n, "code": f"print({n} ** 2)", "timeout": "2s"} for n in range(10_000)]
    for result in pysandbox.dask.run_many(client, jobs):
        print(result["id"], result["status"], result["worker"])

Or from the shell: ``python3 -m pysandbox.dask --scheduler tcp://scheduler:8786 JOBS.jsonl``.
``dask.distributed`` is imported only when a function here needs it, so ``import pysandbox``
works without it.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .. import _process
from .._batch import JobSpec, batch_options, job_line
from .._process import EnvSpec
from .._result import Result

__all__ = ["as_completed", "results", "run_job", "run_many"]


def _profiles_for(line: str, profiles: Sequence[str]) -> list[str]:
    """The ``-p`` options for one job: only its own profile where it is allowed (so the worker
    warms no sandbox it will not use), else all the allowed ones, for pysandbox to refuse the
    job with its usual message."""
    allowed = list(profiles) or ["default"]
    try:
        named = json.loads(line).get("profile")
    except (ValueError, AttributeError):
        named = None
    if named is None:
        return allowed[:1]
    return [named] if named in allowed else allowed


def distributed() -> Any:
    """The ``distributed`` module, imported now (it is untyped to mypy: Any). Raises
    ImportError naming the package to install when it is missing."""
    try:
        return importlib.import_module("distributed")
    except ImportError as e:
        raise ImportError(f"pysandbox.dask needs Dask's distributed ({e}): install Debian's "
                          f"python3-distributed") from e


def _worker_name() -> str | None:
    try:
        return str(distributed().get_worker().name)
    except (ImportError, ValueError):
        return None  # not in a Dask worker: called directly


def run_job(line: str, profiles: Sequence[str] = (), options: Sequence[str] = ()) -> dict[str, Any]:
    """The Dask task: run one job (a ``pysandbox batch`` line) with this host's ``pysandbox``
    (``$PYSANDBOX_BINARY``, else on PATH) and return its result object, with ``worker`` set
    to this worker's name.

    A pure function of its arguments: running it again gives the job's result again.

    Raises:
        SandboxError: pysandbox is missing on this host or failed without a result.
    """
    argv = [_process.find_binary(), "batch", "--jobs", "1"]
    for profile in _profiles_for(line, profiles):
        argv += ["--profile", profile]
    argv += [*options, "-"]
    completed = _process.call(argv, line.encode("utf-8") + b"\n")
    result = _process.single_result(completed)
    obj = dict(result.raw)
    obj["worker"] = _worker_name()
    return obj


def _submit(client: Any, jobs: Iterable[JobSpec], *, profile: str | None,
            profiles: Sequence[str], timeout: float | str | None, env: EnvSpec, net: str | None,
            extra_args: Sequence[str], retries: int) -> list[Any]:
    allowed = ([profile] if profile is not None else []) + [p for p in profiles if p != profile]
    options = batch_options(timeout=timeout, env=env, net=net, extra_args=extra_args)
    lines = [job_line(job, position) for position, job in enumerate(jobs)]
    # pure=False: two equal jobs are two tasks, each with its own result.
    futures: list[Any] = client.map(run_job, lines, profiles=allowed, options=options,
                                    pure=False, retries=retries)
    return futures


def as_completed(client: Any, jobs: Iterable[JobSpec], *, profile: str | None = None,
                 profiles: Sequence[str] = (), timeout: float | str | None = None,
                 env: EnvSpec = (), net: str | None = None, extra_args: Sequence[str] = (),
                 retries: int = 0) -> Iterator[dict[str, Any]]:
    """Like :func:`run_many`, but yields each result as soon as its job is done."""
    futures = _submit(client, jobs, profile=profile, profiles=profiles, timeout=timeout,
                      env=env, net=net, extra_args=extra_args, retries=retries)
    for future in distributed().as_completed(futures):
        obj: dict[str, Any] = future.result()
        yield obj


def run_many(client: Any, jobs: Iterable[JobSpec], *, profile: str | None = None,
             profiles: Sequence[str] = (), timeout: float | str | None = None,
             env: EnvSpec = (), net: str | None = None, extra_args: Sequence[str] = (),
             retries: int = 0) -> list[dict[str, Any]]:
    """Run ``jobs`` on the Dask cluster ``client`` is connected to; their results, in the jobs'
    order.

    Args:
        client: a ``distributed.Client``.
        jobs: as for :func:`pysandbox.batch`: :class:`pysandbox.Job` objects, mappings with a
            job's JSON keys (one without ``id`` gets its position), or JSON lines as they are
            (a bad one gets a ``bad_request`` result).
        profile: the profile of jobs that name none (``"default"`` when None).
        profiles: other profiles jobs may name.
        timeout: every job's wall-clock limit unless the job sets its own; enforced by each
            worker's pysandbox.
        env, net, extra_args: options of ``pysandbox batch`` for every job, as for
            :func:`pysandbox.batch`.
        retries: how many more times Dask runs a job whose task raised (pysandbox failed on
            the worker). A job whose worker died is run again whatever this says.

    Returns:
        One ``pysandbox.result/v1`` object per job (read them with
        :meth:`pysandbox.Result.from_json`), each with its job's ``id`` and the ``worker`` that
        ran it.

    Raises:
        SandboxError: pysandbox failed on a worker for a job (missing, or no result), after
            the retries.
    """
    futures = _submit(client, jobs, profile=profile, profiles=profiles, timeout=timeout,
                      env=env, net=net, extra_args=extra_args, retries=retries)
    results: list[dict[str, Any]] = client.gather(futures)
    return results


def results(objects: Iterable[dict[str, Any]]) -> Iterator[Result]:
    """The result objects :func:`run_many` returns, as :class:`pysandbox.Result` values."""
    return (Result.from_json(obj) for obj in objects)

