#!/usr/bin/env python3
"""What a cell of a pysandbox session costs, next to a cold `pysandbox run` and bare Python.

Times a cell (`print(1)` unless --code) three ways, interleaved round by round so that a slow
moment of the machine hits each alike, and prints the median, 90th percentile and minimum in
milliseconds, with each one's ratio to bare Python and to `pysandbox run`:

  python3    /usr/bin/python3 -s -c CODE              the whole command; no isolation at all
  run        pysandbox run -p PROFILE -c CODE         the whole command: a sandbox per call
  session    one request line to `pysandbox session`  from writing the request to reading its
             -p PROFILE, and its result line back     result; the sandbox is already there

    bench/session.py [--rounds 100] [--warmup 3] [--pysandbox PATH] [--profile NAME]
                     [--code CODE] [--json]

The session's first cell is timed apart, from starting `pysandbox session` to its result: the
sandbox's start (and the profile's [python] preload) is in it. `--profile datascience --code
'import pandas; print(1)'` shows a session paying for pandas once and `run` at every call.
Standard library only. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from startup import CHILD_ENV, PYTHON, machine, parse_options, percentile  # noqa: E402



class Session:
    """One `pysandbox session`, a cell at a time."""

    def __init__(self, pysandbox: str, profile: str):
        self.start = time.perf_counter_ns()
        self.proc = subprocess.Popen([pysandbox, "session", "-p", profile],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=CHILD_ENV, cwd=BENCH)
        self.cells = 0

    def cell(self, code: str) -> tuple[float, dict]:
        """Milliseconds from writing the request to reading its result; the result."""
        self.cells += 1
        line = json.dumps({"id": self.cells, "code": code}).encode() + b"\n"
        start = time.perf_counter_ns()
        self.proc.stdin.write(line)
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        elapsed = (time.perf_counter_ns() - start) / 1e6
        if not answer:
            raise RuntimeError(f"the session ended: {self.proc.stderr.read()[:2000]!r}")
        result = json.loads(answer)
        if result.get("id") != self.cells or result.get("status") != "ok":
            raise RuntimeError(f"cell {self.cells} ({code!r}) failed: {answer[:2000]!r}")
        return elapsed, result

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def run_command(argv: list[str]) -> float:
    """Milliseconds for one complete command, which must exit 0."""
    start = time.perf_counter_ns()
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=CHILD_ENV,
                          cwd=BENCH, timeout=60)
    elapsed = (time.perf_counter_ns() - start) / 1e6
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} failed (exit {proc.returncode}): stdout "
                           f"{proc.stdout[:500]!r}, stderr {proc.stderr[:2000]!r}")
    return elapsed


def measure(pysandbox: str, profile: str, code: str, rounds: int,
            warmup: int) -> tuple[dict, dict]:
    session = Session(pysandbox, profile)
    try:
        session.cell(code)
        first_ms = (time.perf_counter_ns() - session.start) / 1e6
        ways = {
            "python3": lambda: run_command([PYTHON, "-s", "-c", code]),
            "run": lambda: run_command([pysandbox, "run", "-p", profile, "-c", code]),
            "session": lambda: session.cell(code)[0],
        }
        for way in ways.values():  # every way must work before anything is timed
            for _ in range(max(warmup, 1)):
                way()
        samples: dict[str, list[float]] = {name: [] for name in ways}
        names = list(ways)
        for round_number in range(rounds):
            shift = round_number % len(names)  # no way always first, or always after another
            for name in names[shift:] + names[:shift]:
                samples[name].append(ways[name]())
    finally:
        session.close()
    return samples, {"first_cell_ms": first_ms, "cells": session.cells}


def summarize(samples: dict[str, list[float]]) -> list[dict]:
    bare = statistics.median(samples["python3"])
    run = statistics.median(samples["run"])
    rows = []
    for name, values in samples.items():
        median = statistics.median(values)
        rows.append({"way": name, "median_ms": median, "p90_ms": percentile(values, 0.9),
                     "min_ms": min(values), "x_python3": median / bare, "x_run": median / run,
                     "samples": len(values)})
    return rows


def print_table(rows: list[dict], extra: dict, code: str, profile: str, rounds: int) -> None:
    print(f"{code!r}, {rounds} interleaved rounds, profile {profile}; {machine()}")
    header = (f"{'way':<8} {'median ms':>10} {'p90 ms':>8} {'min ms':>8} "
              f"{'x python3':>10} {'x run':>7}")
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row['way']:<8} {row['median_ms']:>10.2f} {row['p90_ms']:>8.2f} "
              f"{row['min_ms']:>8.2f} {row['x_python3']:>10.3f} {row['x_run']:>7.3f}")
    print(f"the session's first cell, its start included: {extra['first_cell_ms']:.1f} ms")


def more_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default="default", help="for run and session")
    parser.add_argument("--code", default="print(1)", help="the cell (default: print(1))")


def main() -> int:
    options = parse_options(__doc__.splitlines()[0], 100, more_options)
    pysandbox = os.path.abspath(options.pysandbox)
    try:
        samples, extra = measure(pysandbox, options.profile, options.code, options.rounds,
                                 options.warmup)
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as error:
        print(f"session.py: {error}", file=sys.stderr)
        return 1
    rows = summarize(samples)
    if options.json:
        json.dump({"rounds": options.rounds, "profile": options.profile, "code": options.code,
                   "rows": rows, **extra,
                   "samples_ms": samples}, sys.stdout, indent=2)
        print()
    else:
        print_table(rows, extra, options.code, options.profile, options.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
