"""``python3 -m pysandbox.dask --scheduler ADDRESS JOBS.jsonl``: the jobs of a ``pysandbox
batch`` file run on a Dask cluster; one result line per job on stdout, each with the ``worker``
that ran it. Exit status: 0 when every job has its result, 125 when pysandbox or the cluster
failed (the message is on stderr)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from typing import IO

from .._errors import SandboxError
from . import as_completed, distributed, run_many


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
    parser.add_argument("--keep-order", action="store_true",
                        help="write the results in the input's order (default: as jobs finish)")
    parser.add_argument("--retries", type=int, default=0, metavar="N",
                        help="run a job again up to N times when pysandbox failed on its worker")
    parser.add_argument("jobs", metavar="JOBS.jsonl", help="the jobs, one a line ('-': stdin)")
    return parser


def _lines(stream: IO[str]) -> Iterator[str]:
    for line in stream:
        if line.strip():  # blank lines are skipped, as pysandbox batch does
            yield line.rstrip("\n")


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
        with distributed().Client(args.scheduler) as client:
            run = run_many if args.keep_order else as_completed
            for result in run(client, lines, profile=profile, profiles=args.profile[1:],
                              timeout=args.timeout, retries=args.retries):
                print(json.dumps(result), flush=True)
    except (SandboxError, OSError) as e:
        print(f"pysandbox.dask: {e}", file=sys.stderr)
        return 125
    return 0


if __name__ == "__main__":
    sys.exit(main())
