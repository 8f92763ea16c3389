#!/usr/bin/env python3
"""Startup cost of the data-science stack: `import pandas, matplotlib.pyplot` inside the sandbox
(pysandbox run -p datascience) against the same interpreter outside, interleaved so both see the
same machine load. Prints the medians and their ratio (target: at most 1.2).

    bench/imports.py [--runs N] [--pysandbox build/bin/pysandbox]
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

CODE = "import pandas, matplotlib.pyplot"
REPO = Path(__file__).resolve().parent.parent


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--pysandbox", default=str(REPO / "build" / "bin" / "pysandbox"))
    args = parser.parse_args()
    outside = ["/usr/bin/python3", "-c", CODE]
    inside = [args.pysandbox, "run", "-p", "datascience", "-c", CODE]
    timed(outside)  # warm the page cache for both
    timed(inside)
    times_in, times_out = [], []
    for _ in range(args.runs):
        times_out.append(timed(outside))
        times_in.append(timed(inside))
    median_in, median_out = statistics.median(times_in), statistics.median(times_out)
    print(f"outside: median {median_out * 1000:.0f} ms over {args.runs} runs")
    print(f"inside:  median {median_in * 1000:.0f} ms over {args.runs} runs")
    print(f"ratio:   {median_in / median_out:.2f} (target <= 1.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
