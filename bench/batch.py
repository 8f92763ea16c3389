#!/usr/bin/env python3
"""Throughput of `pysandbox batch` next to `xargs -P N` over `pysandbox run`.

The same jobs both ways, the two ways alternating round by round so that a slow moment of the
machine hits both: `pysandbox batch -j N` over a JSON-lines file, and `xargs -P N` starting one
`pysandbox run -c CODE` per job. Prints jobs per second (median over the rounds) and the ratio.

    bench/batch.py [--jobs 1000] [--parallel 2] [--rounds 3] [--case sum|pandas] [--json]

`batch --fork` (each job forked from a warm zygote) and `batch --no-preload` (the same jobs,
without the profile's preload) run in the same rounds.

Cases: `sum` runs print(sum(range(1000))) under default; `pandas` imports pandas under
datascience (whose [python] preload imports it before the job arrives).
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASES = {
    "sum": ("default", "print(sum(range(1000)))"),
    "pandas": ("datascience", "import pandas; print(pandas.__version__)"),
}


def run_batch(binary: str, jobs_file: str, parallel: int, profile: str, count: int,
              *options: str) -> float:
    start = time.perf_counter()
    out = subprocess.run([binary, "batch", *options, "-j", str(parallel), "-p", profile, jobs_file],
                         check=True, capture_output=True).stdout.splitlines()
    elapsed = time.perf_counter() - start
    statuses = [json.loads(line)["status"] for line in out]
    if len(statuses) != count or set(statuses) != {"ok"}:
        raise RuntimeError(f"batch: {len(statuses)} results, statuses {set(statuses)}")
    return elapsed


def run_xargs(binary: str, parallel: int, profile: str, code: str, count: int) -> float:
    start = time.perf_counter()
    out = subprocess.run(
        ["xargs", "-P", str(parallel), "-n", "1", "-I{}", binary, "run", "-p", profile, "-c", code],
        input=("x\n" * count).encode(), check=True, capture_output=True).stdout
    elapsed = time.perf_counter() - start
    if len(out.splitlines()) != count:
        raise RuntimeError(f"xargs: {len(out.splitlines())} lines of output for {count} jobs")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--case", choices=sorted(CASES), default="sum")
    parser.add_argument("--pysandbox",
                        default=os.environ.get("PYSANDBOX", str(REPO / "build/bin/pysandbox")))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    profile, code = CASES[args.case]

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as jobs:
        for i in range(args.jobs):
            jobs.write(json.dumps({"id": i, "code": code}) + "\n")
    try:
        batch, fork, plain, xargs = [], [], [], []
        for _ in range(args.rounds):
            fork.append(args.jobs / run_batch(args.pysandbox, jobs.name, args.parallel, profile,
                                              args.jobs, "--fork"))
            batch.append(args.jobs / run_batch(args.pysandbox, jobs.name, args.parallel, profile,
                                               args.jobs))
            plain.append(args.jobs / run_batch(args.pysandbox, jobs.name, args.parallel, profile,
                                               args.jobs, "--no-preload"))
            xargs.append(args.jobs / run_xargs(args.pysandbox, args.parallel, profile, code,
                                               args.jobs))
    finally:
        os.unlink(jobs.name)
    row = {"case": args.case, "jobs": args.jobs, "parallel": args.parallel,
           "rounds": args.rounds,
           "batch_jobs_per_s": round(statistics.median(batch), 1),
           "fork_jobs_per_s": round(statistics.median(fork), 1),
           "no_preload_jobs_per_s": round(statistics.median(plain), 1),
           "xargs_run_jobs_per_s": round(statistics.median(xargs), 1)}
    row["ratio"] = round(row["batch_jobs_per_s"] / row["xargs_run_jobs_per_s"], 2)
    row["fork_ratio"] = round(row["fork_jobs_per_s"] / row["xargs_run_jobs_per_s"], 2)
    row["no_preload_ratio"] = round(row["no_preload_jobs_per_s"] / row["xargs_run_jobs_per_s"], 2)
    if args.json:
        print(json.dumps(row))
    else:
        print(f"{args.case}: {args.jobs} jobs, {args.parallel} at a time, {args.rounds} rounds "
              f"(median): batch {row['batch_jobs_per_s']} jobs/s, xargs -P {args.parallel} "
              f"pysandbox run {row['xargs_run_jobs_per_s']} jobs/s: x{row['ratio']}; "
              f"batch --fork {row['fork_jobs_per_s']} jobs/s: x{row['fork_ratio']}; "
              f"batch --no-preload {row['no_preload_jobs_per_s']} jobs/s: "
              f"x{row['no_preload_ratio']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
