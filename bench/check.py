#!/usr/bin/env python3
"""What `pysandbox check` costs next to a cold `pysandbox run` of the same script.

Writes a script of --lines lines (functions, calls, imports: what generated code looks like),
then times `pysandbox run SCRIPT` and `pysandbox check SCRIPT`, interleaved round by round, and
prints each one's median and 90th percentile in milliseconds and check's ratio to run (issue #15
asks for at most 1.5).

    bench/check.py [--rounds 60] [--lines 1000] [--pysandbox PATH]

Standard library only. See bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def write_script(directory: str, lines: int) -> str:
    body = ["import math", "import json", ""]
    index = 0
    while len(body) < lines - 1:
        body += [f"def step_{index}(x):", f"    y = math.sqrt(x * {index} + 1)",
                 f"    return json.dumps({{'n': {index}, 'y': y}})", ""]
        index += 1
    body.append("print(step_0(2))")
    path = os.path.join(directory, "generated.py")
    Path(path).write_text("\n".join(body[:lines]) + "\n")
    os.chmod(directory, 0o755)
    os.chmod(path, 0o644)
    return path


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr[-500:]!r}")
    return elapsed


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--pysandbox", default=os.environ.get(
        "PYSANDBOX", str(REPO / "build" / "bin" / "pysandbox")))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        script = write_script(directory, args.lines)
        cases = {"run": [args.pysandbox, "run", script],
                 "check": [args.pysandbox, "check", script]}
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for argv in cases.values():
            timed(argv)  # warm-up, and a check that each case works
        for round_number in range(args.rounds):
            names = list(cases) if round_number % 2 == 0 else list(reversed(cases))
            for name in names:
                samples[name].append(timed(cases[name]))
    print(f"a {args.lines}-line script, {args.rounds} interleaved rounds, {os.cpu_count()} CPUs")
    print(f"{'case':<8} {'median ms':>10} {'p90 ms':>8}")
    for name, values in samples.items():
        print(f"{name:<8} {statistics.median(values) * 1000:>10.1f} {p90(values) * 1000:>8.1f}")
    ratio = statistics.median(samples["check"]) / statistics.median(samples["run"])
    print(f"check / run: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
