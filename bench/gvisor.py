#!/usr/bin/env python3
"""What gVisor costs (issue 32), side by side in one interleaved run.

Each round runs every case once, in an order shuffled each round:

  python            /usr/bin/python3 -c CODE                        no sandbox
  run               pysandbox run -c CODE                           the host's kernel
  run --kernel gvisor   pysandbox run --kernel gvisor -c CODE       gVisor's kernel
  run -p paranoid   pysandbox run -p paranoid -c CODE               gVisor with strict's policy:
                    its audit hook's channel connected and sealed before the script (gvisor.hpp)
  runsc do          runsc --rootless --network=none --platform=ptrace do python3 -c CODE
                    gVisor alone, no pysandbox: the floor of a run on gVisor

and then a system-call-heavy script (SYSCALLS: stat, open/read/close and a pipe's write/read, in
a loop) on the host's kernel and on gVisor's, timed by the script itself around its loop, so that
neither start counts: the slowdown a script's system calls meet on gVisor.

Prints median and 90th percentile in ms and the ratios the issue sets targets for: run --kernel
gvisor / runsc do <= 1.2 (cold start against its floor), and the system calls' slowdown (no
target: published in the README). Each as the ratio of the medians and the median of each
round's own ratio.

    bench/gvisor.py [--rounds 15] [--pysandbox PATH] [--json]

Standard library only; needs runsc (Debian's package). runsc do puts its state under
$XDG_RUNTIME_DIR or /tmp; run as root or as an ordinary user, and say which when you quote.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = "/usr/bin/python3"
CODE = "pass"
SYSCALLS = """
import os, time
r, w = os.pipe()
open("/tmp/f", "w").write("x" * 100)
start = time.perf_counter()
for _ in range(5000):
    os.stat("/tmp/f")
    fd = os.open("/tmp/f", os.O_RDONLY)
    os.read(fd, 100)
    os.close(fd)
    os.write(w, b"y")
    os.read(r, 1)
print(time.perf_counter() - start)
"""


def timed(argv: list[str], cwd: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, cwd=cwd)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr[-800:]!r}")
    return elapsed


def self_timed(argv: list[str], cwd: str) -> float:
    """What the script printed: its loop's own time."""
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, cwd=cwd)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr[-800:]!r}")
    return float(done.stdout.split()[-1])


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--pysandbox",
                        default=os.environ.get("PYSANDBOX", str(REPO / "build/bin/pysandbox")))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runsc = shutil.which("runsc")
    if runsc is None:
        print("runsc not found (apt-get install runsc)", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="pysandbox-bench-gvisor-")
    os.chmod(work, 0o755)
    # runsc do wants a writable place for its state and a directory it may use as the cwd.
    state = tempfile.mkdtemp(prefix="pysandbox-bench-gvisor-state-")
    runsc_do = [runsc, "--rootless", "--network=none", "--platform=ptrace", f"--root={state}",
                "do", PYTHON]
    sandbox = [args.pysandbox, "run", "--timeout", "60s"]
    gvisor = [*sandbox, "--kernel", "gvisor"]
    cases = {
        "python": lambda: timed([PYTHON, "-c", CODE], work),
        "run": lambda: timed([*sandbox, "-c", CODE], work),
        "run --kernel gvisor": lambda: timed([*gvisor, "-c", CODE], work),
        "run -p paranoid": lambda: timed([*sandbox, "-p", "paranoid", "-c", CODE], work),
        "runsc do": lambda: timed([*runsc_do, "-c", CODE], work),
        "syscalls, host kernel": lambda: self_timed([*sandbox, "-c", SYSCALLS], work),
        "syscalls, gvisor": lambda: self_timed([*gvisor, "-c", SYSCALLS], work),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for name, case in cases.items():  # one untimed warm-up each (page cache, runsc's files)
            case()
        for _ in range(args.rounds):
            order = list(cases)
            random.shuffle(order)
            for name in order:
                times[name].append(cases[name]())
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)

    def ratio(a: str, b: str) -> dict[str, float]:
        per_round = [x / y for x, y in zip(times[a], times[b])]
        return {"of_medians": statistics.median(times[a]) / statistics.median(times[b]),
                "median_of_rounds": statistics.median(per_round)}

    ratios = {"run --kernel gvisor / runsc do (target <= 1.2)":
              ratio("run --kernel gvisor", "runsc do"),
              "run -p paranoid / runsc do": ratio("run -p paranoid", "runsc do"),
              "run --kernel gvisor / run": ratio("run --kernel gvisor", "run"),
              "syscalls: gvisor / host kernel": ratio("syscalls, gvisor", "syscalls, host kernel")}
    if args.json:
        print(json.dumps({"uid": os.geteuid(), "rounds": args.rounds, "ms": {
            name: {"median": statistics.median(v) * 1000, "p90": p90(v) * 1000}
            for name, v in times.items()}, "ratios": ratios}))
        return 0
    print(f"{'case':28} {'median ms':>10} {'p90 ms':>10}   (uid {os.geteuid()}, "
          f"{args.rounds} rounds, load {os.getloadavg()[0]:.1f})")
    for name, values in times.items():
        print(f"{name:28} {statistics.median(values) * 1000:10.1f} {p90(values) * 1000:10.1f}")
    for name, r in ratios.items():
        print(f"{name}: {r['of_medians']:.2f} (median of rounds {r['median_of_rounds']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
