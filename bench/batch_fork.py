#!/usr/bin/env python3
"""`pysandbox batch --fork` next to plain `batch` and `xargs -P 2` over `pysandbox run`.

The same jobs three ways, alternating round by round; jobs per second (median, with every
round's value) and the ratio to xargs. Standard library only.

    bench/batch_fork.py CASE JOBS ROUNDS [--binary PATH]      # CASE: sum (default profile) or
                                                              # pandas (datascience, preloaded)
"""
import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

CASES = {"sum": ("default", "print(sum(range(1000)))"),
         "pandas": ("datascience", "import pandas; print(pandas.__version__)")}


def batch(binary, extra, path, profile, count):
    start = time.perf_counter()
    out = subprocess.run([binary, "batch", *extra, "-j", "2", "-p", profile, path],
                         capture_output=True, check=True).stdout.splitlines()
    elapsed = time.perf_counter() - start
    statuses = {json.loads(line)["status"] for line in out}
    if len(out) != count or statuses != {"ok"}:
        raise RuntimeError(f"batch {extra}: {len(out)} results, statuses {statuses}")
    return count / elapsed


def xargs(binary, profile, code, count):
    start = time.perf_counter()
    out = subprocess.run(["xargs", "-P", "2", "-n", "1", "-I{}", binary, "run", "-p", profile,
                          "-c", code], input=b"x\n" * count, capture_output=True,
                         check=True).stdout
    if len(out.splitlines()) != count:
        raise RuntimeError(f"xargs: {len(out.splitlines())} lines for {count} jobs")
    return count / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=CASES)
    parser.add_argument("jobs", type=int)
    parser.add_argument("rounds", type=int)
    parser.add_argument("--binary", default=str(Path(__file__).resolve().parent.parent /
                                                "build" / "bin" / "pysandbox"))
    args = parser.parse_args()
    profile, code = CASES[args.case]
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as jobs:
        for i in range(args.jobs):
            jobs.write(json.dumps({"id": i, "code": code}) + "\n")
        jobs.flush()
        rates = {"xargs run": [], "batch": [], "batch --fork": []}
        for _ in range(args.rounds):
            rates["xargs run"].append(xargs(args.binary, profile, code, args.jobs))
            rates["batch"].append(batch(args.binary, [], jobs.name, profile, args.jobs))
            rates["batch --fork"].append(batch(args.binary, ["--fork"], jobs.name, profile,
                                               args.jobs))
    base = statistics.median(rates["xargs run"])
    for name, values in rates.items():
        print(f"{name:<14} {statistics.median(values):7.1f} jobs/s  "
              f"[{' '.join(f'{v:.1f}' for v in values)}]  x{statistics.median(values) / base:.2f}")


if __name__ == "__main__":
    main()
