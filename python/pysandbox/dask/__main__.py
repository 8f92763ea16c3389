"""``python3 -m pysandbox.dask --scheduler ADDRESS JOBS.jsonl``: the jobs of a ``pysandbox
batch`` file run on a Dask cluster, by each worker's warm pysandbox; one result line per job on
stdout, each with the ``worker`` that ran it and its ``line`` in the file. Exit status: 0 when every job has its result, 125 when pysandbox or the cluster
failed (the message is on stderr)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any

from .._errors import SandboxError
from . import MAX_CHUNK, TASKS_PER_THREAD, _as_completed, _submit, distributed


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m pysandbox.dask",
        description="Run pysandbox batch jobs (JSON lines) on a Dask cluster: each worker runs "
                    "its own pysandbox. One result line per job on stdout.")
    parser.add_argument("--scheduler", required=True, metavar="ADDRESS",
                        help="the Dask scheduler, e.g. tcp://scheduler:8786")
    parser.add_argument("-p", "--profile", action="append", default=[], metavar="PROFILE",
                        help="a profile jobs may name (repeatable; the first is the default; "
                             "default: default)")
    parser.add_argument("--timeout", metavar="DUR",
                        help="every job's wall-clock limit unless it sets its own (e.g. 2s)")
    parser.add_argument("--kernel", metavar="KERNEL",
                        help="which kernel answers the jobs' system calls: host, or gvisor "
                             "(as pysandbox batch --kernel; default: the profile's)")
    parser.add_argument("--keep-order", action="store_true",
                        help="write the results in the input's order (default: as jobs finish)")
    parser.add_argument("--retries", type=int, default=0, metavar="N",
                        help="run a chunk again up to N times when pysandbox failed on its worker")
    forking = parser.add_mutually_exclusive_group()
    forking.add_argument("--fork", action="store_true", default=None,
                         help="fork every job's sandbox from the worker's warm zygote, as "
                              "pysandbox batch --fork (see BATCH in pysandbox(1)); an error on "
                              "gVisor (default: fork where the worker's pysandbox enforces a "
                              "forked job as a plain one: not on gVisor, nor where a plain job "
                              "gets a cgroup of its own)")
    forking.add_argument("--no-fork", dest="fork", action="store_false",
                         help="never fork: each job in a sandbox started for it alone, as a plain "
                              "pysandbox batch")
    parser.add_argument("--chunk", type=_positive, metavar="N",
                        help=f"jobs per Dask task (default: about {TASKS_PER_THREAD} tasks per "
                             f"thread of the cluster, at most {MAX_CHUNK} jobs each)")
    parser.add_argument("jobs", metavar="JOBS.jsonl", help="the jobs, one a line ('-': stdin)")
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"not a number of jobs (1 or more): {text!r}")
    return value


def _lines(stream: IO[str]) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(stream, start=1):
        if line.strip():  # blank lines are skipped, as pysandbox batch does
            yield number, line.rstrip("\n")


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.jobs == "-":
            lines = list(_lines(sys.stdin))
        else:
            with open(args.jobs, encoding="utf-8") as stream:
                lines = list(_lines(stream))
        profile = args.profile[0] if args.profile else None
        options = {"profile": profile, "profiles": args.profile[1:], "timeout": args.timeout,
                   "env": (), "net": None, "kernel": args.kernel, "extra_args": (),
                   "retries": args.retries, "fork": args.fork, "chunk": args.chunk}
        with distributed().Client(args.scheduler) as client:
            results: Iterable[dict[str, Any]]
            if args.keep_order:
                chunks: list[list[dict[str, Any]]] = client.gather(
                    _submit(client, lines, **options))
                results = (obj for chunk in chunks for obj in chunk)
            else:
                results = _as_completed(client, lines, **options)
            for result in results:
                print(json.dumps(result), flush=True)
    except (SandboxError, OSError) as e:
        print(f"pysandbox.dask: {e}", file=sys.stderr)
        return 125
    return 0


if __name__ == "__main__":
    sys.exit(main())
