#!/usr/bin/env python3
"""Jobs through pysandbox.dask on a local Dask cluster next to `pysandbox batch --fork` on the
same cores (issue 35: the cluster at least 0.8x batch --fork).

Starts a `dask scheduler` and `--workers` (2) `dask worker` processes on 127.0.0.1, each with
`--nthreads` (1) threads, with Debian's /usr/bin/python3 and the package from `--python`
(default: this tree's python/). Then, in `--rounds` rounds, the order rotated each round so that a
slow moment of the machine hits all alike, runs the same `--jobs` trivial jobs
(print(sum(range(1000))) under default) each way:

  fork       pysandbox batch --fork -j WORKERS*NTHREADS over a JSON-lines file
  noop       one Dask task per job, of a function that returns its argument: what
             distributed itself costs a task (scheduler, worker, client), no sandbox at all
  cold       one Dask task per job that runs a `pysandbox batch --jobs 1` of its own, as
             pysandbox.dask did before its workers kept a warm pysandbox (issue 35)
  dask       pysandbox.dask.run_many(client, jobs) with the library's defaults: chunks of jobs
             per task, each worker's warm fork server (on the host's kernel, here)
  dask_plain run_many(..., fork=False): each worker's warm plain `pysandbox batch`, a sandbox
             started for each job (the default before)
  dask_fork  run_many(..., fork=True): as the default here, asked for
  dask_task  run_many(..., chunk=1): one task per job, each worker's warm fork server
  cli        python3 -m pysandbox.dask --scheduler ... JOBS.jsonl, end to end (its
             interpreter's start, importing distributed and connecting included)

The workers' warm servers outlive a round (that is their point); the first round starts them, so
first untimed rounds (--warmup, 1) run each way that uses them once. Prints the median jobs per second of each
way, its range, and each way's ratio to batch --fork (the median of each round's own ratio).

    bench/dask_cluster.py [--jobs 1000] [--rounds 5] [--only fork,noop,dask_fork] [--json]

Standard library, and Debian's python3-distributed for the cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PYTHON = "/usr/bin/python3"  # Debian's, with python3-distributed
CODE = "print(sum(range(1000)))"
WAYS = ("fork", "noop", "cold", "dask", "dask_plain", "dask_fork", "dask_task", "cli")
COLD_WAYS = ("fork", "noop", "cold")  # nothing of theirs outlives a round: no warm-up


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def echo(x: Any) -> Any:
    return x


def cold_job(line: str) -> dict[str, Any]:
    import pysandbox.dask
    return pysandbox.dask._run_cold(line, ["default"], [])


class Cluster:
    def __init__(self, directory: Path, env: dict[str, str], workers: int, nthreads: int) -> None:
        import distributed
        self.address = f"tcp://127.0.0.1:{free_port()}"
        self.processes: list[subprocess.Popen[bytes]] = []
        dask = [PYTHON, "-m", "dask"]
        self.start(directory / "scheduler.log", env,
                   [*dask, "scheduler", "--host", "127.0.0.1", "--port",
                    self.address.rpartition(":")[2], "--no-dashboard", "--idle-timeout", "600s"])
        for n in range(workers):
            self.start(directory / f"w{n + 1}.log", env,
                       [*dask, "worker", self.address, "--name", f"w{n + 1}", "--nthreads",
                        str(nthreads), "--no-nanny", "--no-dashboard", "--host", "127.0.0.1",
                        "--death-timeout", "30s", "--local-directory", str(directory / f"w{n}")])
        self.client = distributed.Client(self.address, timeout="30s")
        self.client.wait_for_workers(workers, timeout=60)

    def start(self, log_path: Path, env: dict[str, str], argv: list[str]) -> None:
        with open(log_path, "wb") as log:
            self.processes.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                                   stderr=log, env=env))

    def close(self) -> None:
        self.client.close()
        for process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def check(results: list[dict[str, Any]], count: int, way: str) -> None:
    statuses = {r["status"] for r in results}
    ids = sorted(r["id"] for r in results)
    if ids != list(range(count)) or statuses != {"ok"}:
        raise RuntimeError(f"{way}: {len(results)} results, statuses {statuses}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--nthreads", type=int, default=1)
    parser.add_argument("--only", default="fork,noop,cold,dask,dask_plain,dask_fork,dask_task",
                        help=f"a comma-separated subset of {','.join(WAYS)}")
    parser.add_argument("--python", default=str(REPO / "python"),
                        help="the directory holding the pysandbox package the cluster imports")
    parser.add_argument("--pysandbox",
                        default=os.environ.get("PYSANDBOX", str(REPO / "build/bin/pysandbox")))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    only = args.only.split(",")
    if not set(only) <= set(WAYS):
        parser.error(f"--only: not one of {','.join(WAYS)}: {','.join(set(only) - set(WAYS))}")
    sys.path.insert(0, args.python)
    import pysandbox.dask

    parallel = args.workers * args.nthreads
    env = dict(os.environ, PYTHONPATH=args.python, PYSANDBOX_BINARY=args.pysandbox)
    directory = Path(tempfile.mkdtemp(prefix="pysandbox-bench-dask-"))
    jobs_file = directory / "jobs.jsonl"
    jobs = [{"id": n, "code": CODE} for n in range(args.jobs)]
    jobs_file.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    cluster = Cluster(directory, env, args.workers, args.nthreads)

    def batch_fork() -> None:
        out = subprocess.run([args.pysandbox, "batch", "--fork", "-j", str(parallel), "-p",
                              "default", str(jobs_file)], check=True, capture_output=True,
                             env=env).stdout
        check([json.loads(line) for line in out.splitlines()], args.jobs, "fork")

    def noop() -> None:
        futures = cluster.client.map(echo, range(args.jobs), pure=False)
        if cluster.client.gather(futures) != list(range(args.jobs)):
            raise RuntimeError("noop: wrong results")

    def cold() -> None:
        lines = [json.dumps(job) for job in jobs]
        check(cluster.client.gather(cluster.client.map(cold_job, lines, pure=False)), args.jobs,
              "cold")

    def dask(**options: Any) -> Callable[[], None]:
        def run() -> None:
            check(pysandbox.dask.run_many(cluster.client, jobs, **options), args.jobs, "dask")
        return run

    def cli() -> None:
        out = subprocess.run([PYTHON, "-m", "pysandbox.dask", "--scheduler",
                              cluster.address, str(jobs_file)], check=True, capture_output=True,
                             env=env).stdout
        check([json.loads(line) for line in out.splitlines()], args.jobs, "cli")

    ways: dict[str, Callable[[], None]] = {
        "fork": batch_fork, "noop": noop, "cold": cold, "dask": dask(),
        "dask_plain": dask(fork=False), "dask_fork": dask(fork=True), "dask_task": dask(chunk=1),
        "cli": cli}
    ways = {name: ways[name] for name in only}
    rates: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for round_number in range(args.warmup + args.rounds):
            names = list(ways)
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                if round_number < args.warmup and name in COLD_WAYS:
                    continue
                start = time.perf_counter()
                ways[name]()
                elapsed = time.perf_counter() - start
                if round_number >= args.warmup:
                    rates[name].append(args.jobs / elapsed)
    finally:
        cluster.close()
        shutil.rmtree(directory, ignore_errors=True)

    row: dict[str, Any] = {"jobs": args.jobs, "workers": args.workers, "nthreads": args.nthreads,
                           "rounds": args.rounds, "load_average": os.getloadavg()[0]}
    for name, samples in rates.items():
        row[f"{name}_jobs_per_s"] = round(statistics.median(samples), 1)
        row[f"{name}_range"] = [round(min(samples), 1), round(max(samples), 1)]
        if "fork" in rates and name != "fork":
            row[f"{name}_fork_ratio"] = round(statistics.median(
                a / b for a, b in zip(samples, rates["fork"])), 3)
    if args.json:
        row["samples"] = {name: [round(rate, 1) for rate in samples]
                          for name, samples in rates.items()}
        print(json.dumps(row))
        return 0
    print(f"{args.jobs} jobs of {CODE}, {args.workers} workers x {args.nthreads} thread(s), "
          f"{args.rounds} rounds (+{args.warmup} untimed), medians [range]")
    labels = {"fork": f"batch --fork -j {parallel}", "noop": "dask: a no-op task per job",
              "cold": "a cold pysandbox batch per task",
              "dask": "pysandbox.dask defaults", "dask_plain": "pysandbox.dask fork=False",
              "dask_fork": "pysandbox.dask fork=True", "dask_task": "... defaults, chunk=1",
              "cli": "python3 -m pysandbox.dask"}
    for name in rates:
        ratio = row.get(f"{name}_fork_ratio")
        print(f"  {labels[name]:34} {row[name + '_jobs_per_s']:>8} jobs/s  "
              f"{row[name + '_range']}" + (f"  x{ratio} of batch --fork" if ratio else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
