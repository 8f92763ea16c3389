#!/usr/bin/env python3
"""Throughput of `pysandbox batch` next to `xargs -P N` over `pysandbox run`, and of `batch --fork`
next to a bare fork server (the physical limit).

The same jobs every way, in the same rounds, the order rotated each round so that a slow moment of
the machine hits all alike: `pysandbox batch -j N` over a JSON-lines file, `xargs -P N` starting
one `pysandbox run -c CODE` per job, `batch --fork` (each job forked from a warm zygote), `batch
--no-preload` (without the profile's preload), and the floor: bench/fork_floor.py run by
/usr/bin/python3, a fork server preloaded as the profile's is that forks one child per job, N at a
time, with no namespaces and no walls, reading each child's stdout through a pipe. Prints jobs per
second (median over the rounds) and the ratios: batch / xargs and batch --fork / floor (the
median of each round's own ratio).

    bench/batch.py [--jobs 1000] [--parallel 2] [--rounds 3] [--case sum|pandas] [--json]

Cases: `sum` runs print(sum(range(1000))) under default; `pandas` imports pandas under
datascience (whose [python] preload imports it before the job arrives).
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
WAYS = ("fork", "floor", "batch", "no_preload", "xargs_run")
FLOOR = Path(__file__).resolve().parent / "fork_floor.py"
FLOOR_PYTHON = "/usr/bin/python3"  # the interpreter the profiles run


def profile_preload(profile: str) -> list[str]:
    """The [python] preload of profiles/PROFILE.toml: what the floor imports before it forks."""
    import tomllib  # Python 3.11
    with open(REPO / "profiles" / f"{profile}.toml", "rb") as file:
        return tomllib.load(file).get("python", {}).get("preload", [])


# With --cpu: every command runs under `perf stat -e task-clock`, which counts the CPU time of
# the whole process tree, sandboxes and forks included (getrusage misses what a sandbox's init
# reaps inside its PID namespace). On a loaded machine that is the figure to compare: wall time
# then measures the scheduler's wake-up latency as much as the work.
PERF_PREFIX: list[str] = []


def perf_prefix(output: str | None) -> list[str]:
    if not output:
        return []
    return ["perf", "stat", "-x", ",", "-e", "task-clock", "-o", output, "--"]


def read_task_clock_ms(output: str) -> float:
    with open(output, encoding="utf-8") as file:
        for line in file:
            fields = line.split(",")
            if len(fields) > 2 and fields[2].startswith("task-clock"):
                return float(fields[0])
    raise RuntimeError(f"perf stat wrote no task-clock to {output}")


def run_batch(binary: str, jobs_file: str, parallel: int, profile: str, count: int,
              *options: str) -> float:
    start = time.perf_counter()
    out = subprocess.run([*PERF_PREFIX, binary, "batch", *options, "-j", str(parallel), "-p", profile, jobs_file],
                         check=True, capture_output=True).stdout.splitlines()
    elapsed = time.perf_counter() - start
    statuses = [json.loads(line)["status"] for line in out]
    if len(statuses) != count or set(statuses) != {"ok"}:
        raise RuntimeError(f"batch: {len(statuses)} results, statuses {set(statuses)}")
    return elapsed


def run_floor(jobs_file: str, parallel: int, preload: list[str], count: int) -> float:
    start = time.perf_counter()
    out = subprocess.run([*PERF_PREFIX, FLOOR_PYTHON, "-s", str(FLOOR), jobs_file, "--parallel", str(parallel),
                          "--preload", ",".join(preload)],
                         check=True, capture_output=True).stdout.splitlines()
    elapsed = time.perf_counter() - start
    codes = [json.loads(line)["exit_code"] for line in out]
    if len(codes) != count or set(codes) != {0}:
        raise RuntimeError(f"fork_floor: {len(codes)} results, exit codes {set(codes)}")
    return elapsed


def run_xargs(binary: str, parallel: int, profile: str, code: str, count: int) -> float:
    start = time.perf_counter()
    out = subprocess.run(
        [*PERF_PREFIX, "xargs", "-P", str(parallel), "-n", "1", "-I{}", binary, "run", "-p", profile, "-c", code],
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
    parser.add_argument("--only", default=",".join(WAYS),
                        help=f"a comma-separated subset of {','.join(WAYS)}")
    parser.add_argument("--cpu", action="store_true",
                        help="also the CPU time per job, through perf stat (linux-perf)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    profile, code = CASES[args.case]
    perf_output = None
    if args.cpu:
        if shutil.which("perf") is None:
            parser.error("--cpu: perf is not installed (Debian: linux-perf)")
        perf_output = os.path.join(tempfile.mkdtemp(prefix="pysandbox-batch-"), "perf.csv")
    args.cpu = perf_output

    preload = profile_preload(profile)

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as jobs:
        for i in range(args.jobs):
            jobs.write(json.dumps({"id": i, "code": code}) + "\n")
    ways = {
        "fork": lambda: run_batch(args.pysandbox, jobs.name, args.parallel, profile, args.jobs,
                                  "--fork"),
        "floor": lambda: run_floor(jobs.name, args.parallel, preload, args.jobs),
        "batch": lambda: run_batch(args.pysandbox, jobs.name, args.parallel, profile, args.jobs),
        "no_preload": lambda: run_batch(args.pysandbox, jobs.name, args.parallel, profile,
                                        args.jobs, "--no-preload"),
        "xargs_run": lambda: run_xargs(args.pysandbox, args.parallel, profile, code, args.jobs),
    }
    only = args.only.split(",")
    if not set(only) <= set(WAYS):
        parser.error(f"--only: not one of {','.join(WAYS)}: {','.join(set(only) - set(WAYS))}")
    ways = {name: run for name, run in ways.items() if name in only}
    rates: dict[str, list[float]] = {name: [] for name in ways}
    cpu_ms: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for round_number in range(args.rounds):
            names = list(ways)
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                PERF_PREFIX[:] = perf_prefix(args.cpu)
                rates[name].append(args.jobs / ways[name]())
                if args.cpu:
                    cpu_ms[name].append(read_task_clock_ms(args.cpu) / args.jobs)
    finally:
        os.unlink(jobs.name)
        if perf_output:
            shutil.rmtree(os.path.dirname(perf_output), ignore_errors=True)

    def ratio(top: str, bottom: str) -> float | None:
        if top not in rates or bottom not in rates:
            return None
        return round(statistics.median(a / b for a, b in zip(rates[top], rates[bottom])), 3)

    row: dict[str, object] = {"case": args.case, "jobs": args.jobs, "parallel": args.parallel,
                              "rounds": args.rounds}
    for name, samples in rates.items():
        row[f"{name}_jobs_per_s"] = round(statistics.median(samples), 1)
        if args.cpu:
            row[f"{name}_cpu_ms_per_job"] = round(statistics.median(cpu_ms[name]), 3)
    row["ratio"] = ratio("batch", "xargs_run")
    row["fork_ratio"] = ratio("fork", "xargs_run")
    row["no_preload_ratio"] = ratio("no_preload", "xargs_run")
    row["fork_floor_ratio"] = ratio("fork", "floor")
    row["fork_floor_cpu_ratio"] = None
    if args.cpu and "fork" in cpu_ms and "floor" in cpu_ms:
        row["fork_floor_cpu_ratio"] = round(statistics.median(
            f / b for f, b in zip(cpu_ms["floor"], cpu_ms["fork"])), 3)
    if args.json:
        row["samples"] = {name: [round(rate, 1) for rate in samples]
                          for name, samples in rates.items()}
        if args.cpu:
            row["cpu_samples"] = {name: [round(ms, 3) for ms in samples]
                                  for name, samples in cpu_ms.items()}
        print(json.dumps(row))
    else:
        print(f"{args.case}: {args.jobs} jobs, {args.parallel} at a time, {args.rounds} rounds, "
              f"medians")
        print(f"  {'':24} {'jobs/s':>8} {'cpu ms/job':>11}")
        labels = {"floor": "floor (bare fork server)", "fork": "batch --fork",
                  "batch": "batch", "no_preload": "batch --no-preload",
                  "xargs_run": f"xargs -P {args.parallel} … run"}
        for name, label in labels.items():
            if name not in rates:
                continue
            print(f"  {label:24} {row[name + '_jobs_per_s']:>8} "
                  f"{row.get(name + '_cpu_ms_per_job', '-'):>11}")
        if row["fork_floor_ratio"] is not None:
            print(f"  batch --fork / floor: x{row['fork_floor_ratio']} in jobs/s"
                  + (f", x{row['fork_floor_cpu_ratio']} in CPU per job (floor's / fork's)"
                     if row["fork_floor_cpu_ratio"] else ""))
        for label, key in (("batch / xargs", "ratio"), ("batch --fork / xargs", "fork_ratio"),
                           ("batch --no-preload / xargs", "no_preload_ratio")):
            if row[key] is not None:
                print(f"  {label}: x{row[key]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
