"""Many machines: pysandbox jobs on a Dask cluster (Debian's ``python3-distributed``).

Each worker keeps a warm ``pysandbox`` of its own: a long-lived ``pysandbox batch --fork -`` per
profile (plain ``pysandbox batch -`` on gVisor, with ``fork=False``, or where a forked job would
lose a layer a plain one has), as many jobs at once as the worker has threads, held by a worker
plugin (:class:`WarmServers`, installed by the first task on the worker) that ends it when
the worker closes. The Dask tasks, :func:`run_jobs`, each hand a chunk of jobs to it and wait for
their result lines: the isolation is pysandbox's, every job in a sandbox of its own with every
layer, the same on every host, and the job's timeout is pysandbox's, not Dask's. A task is a pure
function of its jobs (it reads and writes nothing but the sandboxes' output), so when a worker
dies mid-chunk Dask runs the chunk again elsewhere and each job is answered once. Results are the
JSON objects ``pysandbox batch`` prints, each with a ``worker`` field naming the worker that ran
it and ``line``, the job's place in the jobs given (from 1)::

    from distributed import Client
    import pysandbox.dask

    client = Client("tcp://scheduler:8786")
    jobs = [{"id": n, "code": f"print({n} ** 2)", "timeout": "2s"} for n in range(10_000)]
    for result in pysandbox.dask.as_completed(client, jobs):
        print(result["id"], result["status"], result["worker"])

Or from the shell: ``python3 -m pysandbox.dask --scheduler tcp://scheduler:8786 JOBS.jsonl``.
``dask.distributed`` is imported only when a function here needs it, so ``import pysandbox``
works without it.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .. import _process
from .._batch import JobSpec, batch_options, job_line
from .._errors import SandboxError
from .._process import EnvSpec
from .._result import Result
from ._server import Servers, check_fork, own_servers

__all__ = ["PLUGIN_NAME", "WarmServers", "as_completed", "results", "run_job", "run_jobs",
           "run_many"]

PLUGIN_NAME = "pysandbox"
"""The name of :class:`WarmServers` among a worker's plugins."""

TASKS_PER_THREAD = 8
"""With ``chunk=None``, jobs are cut into about this many tasks per thread of the cluster: few
enough that Dask's own cost per task (a few milliseconds of scheduler, worker and client) is
small beside the jobs', many enough that the last chunks still share out over the workers."""

MAX_CHUNK = 64
"""The most jobs a task gets with ``chunk=None``."""


class WarmServers:
    """The Dask worker plugin that holds a worker's warm pysandbox servers (one ``pysandbox
    batch -`` per profile and option set, with ``--fork`` or without as :func:`run_many`'s
    ``fork`` says, ``--jobs`` the worker's threads unless ``jobs_at_once`` says) and ends them when the worker closes.

    :func:`run_jobs` installs it on its worker when it is missing; register it yourself to
    choose ``jobs_at_once``: ``client.register_worker_plugin(WarmServers(4))`` (that ends the
    servers of a plugin registered before)."""

    name = PLUGIN_NAME

    def __init__(self, jobs_at_once: int | None = None) -> None:
        self.jobs_at_once = jobs_at_once
        self.servers: Servers | None = None

    def setup(self, worker: Any) -> None:
        """Called by the worker when the plugin is added."""
        threads = getattr(getattr(worker, "state", worker), "nthreads", None)
        self.servers = Servers(self.jobs_at_once or threads)

    async def teardown(self, worker: Any) -> None:
        """Called by the worker when it closes (or the plugin is replaced): the servers end,
        the jobs still in them answered with ``sandbox_error`` results."""
        if self.servers is not None:
            await asyncio.to_thread(self.servers.close)

    def __getstate__(self) -> dict[str, Any]:
        return {"jobs_at_once": self.jobs_at_once, "servers": None}


def _profile_for(line: str, profiles: Sequence[str]) -> str | None:
    """The profile whose server runs the job on ``line``: its own if it names one allowed, the
    first allowed if it names none (or is not a JSON object: that server answers
    ``bad_request``); None when it names a profile not allowed."""
    allowed = list(profiles) or ["default"]
    try:
        obj = json.loads(line)
    except ValueError:
        return allowed[0]
    named = obj.get("profile") if isinstance(obj, dict) else None
    if named is None:
        return allowed[0]
    return named if named in allowed else None


def distributed() -> Any:
    """The ``distributed`` module, imported now (it is untyped to mypy: Any). Raises
    ImportError naming the package to install when it is missing."""
    try:
        return importlib.import_module("distributed")
    except ImportError as e:
        raise ImportError(f"pysandbox.dask needs Dask's distributed ({e}): install Debian's "
                          f"python3-distributed") from e


def _worker() -> Any:
    try:
        return distributed().get_worker()
    except (ImportError, ValueError):
        return None  # not in a Dask worker: called directly


async def _install(worker: Any) -> None:
    if PLUGIN_NAME not in worker.plugins:  # on the worker's loop: no other task is adding it
        await worker.plugin_add(WarmServers(), name=PLUGIN_NAME)


def _servers(worker: Any) -> Servers:
    """The worker's servers (its plugin's, installed now if missing), or this process's own
    outside a worker."""
    if worker is None:
        return own_servers()
    plugin = worker.plugins.get(PLUGIN_NAME)
    if plugin is None:
        distributed().utils.sync(worker.loop, _install, worker)
        plugin = worker.plugins[PLUGIN_NAME]
    servers: Servers | None = getattr(plugin, "servers", None)
    if servers is None:
        raise SandboxError(f"the worker's {PLUGIN_NAME} plugin holds no servers")
    return servers


def _run_cold(line: str, profiles: Sequence[str], options: Sequence[str]) -> dict[str, Any]:
    """A job naming a profile not allowed: a ``pysandbox batch`` of its own, allowing every
    allowed profile, answers it with its usual ``bad_request``."""
    argv = [_process.find_binary(), "batch", "--jobs", "1"]
    for profile in list(profiles) or ["default"]:
        argv += ["--profile", profile]
    argv += [*options, "-"]
    completed = _process.call(argv, line.encode("utf-8") + b"\n")
    return dict(_process.single_result(completed).raw)


def run_jobs(jobs: Sequence[tuple[int, str]], profiles: Sequence[str] = (),
             options: Sequence[str] = (), fork: bool | None = None) -> list[dict[str, Any]]:
    """The Dask task: run a chunk of jobs (``pysandbox batch`` lines, each with its place in
    the input) on this worker's warm servers (:class:`WarmServers`; this process's own outside
    a worker), ``options`` being those of ``pysandbox batch``, and ``fork`` as for
    :func:`run_many` (``--fork`` among ``options`` forks, whatever ``fork`` says).
    Their result objects, in the jobs' order, each with ``line`` set to the job's place and
    ``worker`` to this worker's name (none outside a worker).

    A pure function of its arguments: running it again gives the jobs' results again. Jobs in
    a server that ends before answering them (killed, crashed) get a ``sandbox_error`` result
    whose ``error.step`` is "worker"; the next job starts a new server.

    Raises:
        SandboxError: pysandbox is missing on this host, or refused the options or profile.
    """
    worker = _worker()
    servers = _servers(worker)
    waiting: list[Any] = []
    for _, line in jobs:
        profile = _profile_for(line, profiles)
        waiting.append(None if profile is None else servers.send(profile, options, line, fork))
    results = []
    for (number, line), waiter in zip(jobs, waiting):
        obj = _run_cold(line, profiles, options) if waiter is None else dict(waiter.wait())
        obj["line"] = number
        if worker is not None:
            obj["worker"] = str(worker.name)
        results.append(obj)
    return results


def run_job(line: str, profiles: Sequence[str] = (), options: Sequence[str] = (),
            fork: bool | None = None) -> dict[str, Any]:
    """One job through :func:`run_jobs`, as the first line of its input."""
    [result] = run_jobs([(1, line)], profiles, options, fork)
    return result


def _chunk_size(client: Any, count: int, chunk: int | None) -> int:
    if chunk is not None:
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"chunk is a number of jobs per task, at least 1, not {chunk!r}")
        return chunk
    threads: int = max(1, sum(client.nthreads().values()))
    return max(1, min(MAX_CHUNK, math.ceil(count / (TASKS_PER_THREAD * threads))))


def _numbered(jobs: Iterable[JobSpec]) -> list[tuple[int, str]]:
    numbered = []
    for position, job in enumerate(jobs):
        line = job_line(job, position)
        if not line.strip():
            raise ValueError(f"job {position} is a blank line")
        numbered.append((position + 1, line))
    return numbered


def _submit(client: Any, jobs: list[tuple[int, str]], *, profile: str | None,
            profiles: Sequence[str], timeout: float | str | None, env: EnvSpec, net: str | None,
            kernel: str | None,
            extra_args: Sequence[str], retries: int, fork: bool | None,
            chunk: int | None) -> list[Any]:
    check_fork(fork)  # here too: before any task is submitted
    allowed = ([profile] if profile is not None else []) + [p for p in profiles if p != profile]
    options = batch_options(timeout=timeout, env=env, net=net, kernel=kernel,
                            extra_args=extra_args)
    size = _chunk_size(client, len(jobs), chunk)
    chunks = [jobs[at:at + size] for at in range(0, len(jobs), size)]
    # pure=False: two equal chunks are two tasks, each with its own results.
    futures: list[Any] = client.map(run_jobs, chunks, profiles=allowed, options=options,
                                    fork=fork, pure=False, retries=retries)
    return futures


def _as_completed(client: Any, jobs: list[tuple[int, str]], **options: Any) -> Iterator[
        dict[str, Any]]:
    futures = _submit(client, jobs, **options)
    for future in distributed().as_completed(futures):
        chunk: list[dict[str, Any]] = future.result()
        yield from chunk


def as_completed(client: Any, jobs: Iterable[JobSpec], *, profile: str | None = None,
                 profiles: Sequence[str] = (), timeout: float | str | None = None,
                 env: EnvSpec = (), net: str | None = None, kernel: str | None = None,
                 extra_args: Sequence[str] = (),
                 retries: int = 0, fork: bool | None = None, chunk: int | None = None) -> Iterator[
                     dict[str, Any]]:
    """Like :func:`run_many`, but yields the results of each chunk of jobs as soon as it is
    done."""
    return _as_completed(client, _numbered(jobs), profile=profile, profiles=profiles,
                         timeout=timeout, env=env, net=net, kernel=kernel, extra_args=extra_args,
                         retries=retries, fork=fork, chunk=chunk)


def run_many(client: Any, jobs: Iterable[JobSpec], *, profile: str | None = None,
             profiles: Sequence[str] = (), timeout: float | str | None = None,
             env: EnvSpec = (), net: str | None = None, kernel: str | None = None,
             extra_args: Sequence[str] = (),
             retries: int = 0, fork: bool | None = None, chunk: int | None = None) -> list[
                 dict[str, Any]]:
    """Run ``jobs`` on the Dask cluster ``client`` is connected to; their results, in the jobs'
    order.

    Args:
        client: a ``distributed.Client``.
        jobs: as for :func:`pysandbox.batch`: :class:`pysandbox.Job` objects, mappings with a
            job's JSON keys (one without ``id`` gets its position), or JSON lines as they are
            (a bad one gets a ``bad_request`` result; a blank one is a ValueError).
        profile: the profile of jobs that name none (``"default"`` when None).
        profiles: other profiles jobs may name.
        timeout: every job's wall-clock limit unless the job sets its own; enforced by each
            worker's pysandbox.
        env, net, kernel, extra_args: options of ``pysandbox batch`` for every job, as for
            :func:`pysandbox.batch` (``kernel="gvisor"``: every job on gVisor).
        retries: how many more times Dask runs a chunk whose task raised (pysandbox failed on
            the worker). A chunk whose worker died is run again whatever this says.
        fork: None (the default): each worker forks its jobs' sandboxes from a warm zygote
            (``batch --fork``, several times the jobs per second) where its pysandbox enforces
            a forked job exactly as a plain one (the results' ``enforcement`` equal), and runs
            a plain warm ``pysandbox batch`` elsewhere: on gVisor, which has no fork server,
            and where a plain job gets a cgroup of its own (a forked one has rlimits only); it
            decides when it starts a server, by running one job each way. Forked jobs share
            what BATCH in pysandbox(1) lists (up to 256 in a row are copies of one process: its
            address-space layout, stack canary and str hash secret). True: always ``--fork``
            (SandboxError on gVisor, as pysandbox refuses it there). False: never.
        chunk: jobs per Dask task; None: about :data:`TASKS_PER_THREAD` tasks per thread of
            the cluster, at most :data:`MAX_CHUNK` jobs each. A task's results come back
            together, and a chunk whose worker died runs again as a whole elsewhere.

    Returns:
        One ``pysandbox.result/v1`` object per job (read them with
        :meth:`pysandbox.Result.from_json`), each with its job's ``id``, its place in ``jobs``
        (``line``, from 1) and the ``worker`` that ran it.

    Raises:
        SandboxError: pysandbox failed on a worker (missing, or it refused the options or a
            profile), after the retries.
        ValueError: a job is a blank line or a string of more than one line.
    """
    futures = _submit(client, _numbered(jobs), profile=profile, profiles=profiles,
                      timeout=timeout, env=env, net=net, kernel=kernel, extra_args=extra_args,
                      retries=retries,
                      fork=fork, chunk=chunk)
    chunks: list[list[dict[str, Any]]] = client.gather(futures)
    return [obj for results in chunks for obj in results]


def results(objects: Iterable[dict[str, Any]]) -> Iterator[Result]:
    """The result objects :func:`run_many` returns, as :class:`pysandbox.Result` values."""
    return (Result.from_json(obj) for obj in objects)
