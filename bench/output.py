#!/usr/bin/env python3
"""Output throughput: a script printing 100 MB through pysandbox, next to bare Python.

The script writes 100 MiB to stdout in chunks of --chunk bytes (64 KiB; 1 MiB is the other case
issue #15 names); the reader is a pipe drained into /dev/null (`| cat > /dev/null`, as in a shell
pipeline). Runs are interleaved round by round; the table gives the median wall-clock time, MB/s
and the ratio to bare Python.

    bench/output.py [--rounds 15] [--mib 100] [--chunk 64KiB|1MiB] [--busy] [--pysandbox PATH]
                    [--only CASE,...] [--compare PATH]

--busy runs one CPU-bound process (a spinning loop) for the whole benchmark, so that every case
shares the machine with a second job, as on a CI runner or a batch host; the spinner is the same
for all cases, so the ratios compare like with like.

Cases:
  python3            /usr/bin/python3 -s flood.py | cat
  bwrap              bubblewrap (as bench/startup.py runs it) around the same: the script writes
                     to the caller's pipe itself (left out when bwrap is not installed)
  pysandbox          pysandbox run --output-limit 1GiB flood.py | cat   (everything passes through)
  pysandbox --json   captured into the JSON result, default output limit (16 MiB kept)
  --json 1GiB        captured into the JSON result, --output-limit 1GiB: all of it encoded
  pysandbox capped   --output-limit 1MiB: head and tail kept, the rest counted and dropped

Standard library only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import startup

REPO = Path(__file__).resolve().parent.parent
PYTHON = "/usr/bin/python3"


def flood_script(directory: str, mib: int, chunk: int) -> str:
    path = os.path.join(directory, "flood.py")
    Path(path).write_text(
        f"import sys\nchunk = b'x' * {chunk}\nw = sys.stdout.buffer.write\n"
        f"for _ in range({mib * 1024 * 1024 // chunk}):\n    w(chunk)\n")
    os.chmod(directory, 0o755)
    os.chmod(path, 0o644)
    return path


def parse_size(text: str) -> int:
    units = {"KIB": 1024, "MIB": 1024 * 1024, "": 1}
    upper = text.upper()
    for suffix, factor in units.items():
        if suffix and upper.endswith(suffix):
            return int(upper[: -len(suffix)]) * factor
    return int(text)


def start_spinner() -> subprocess.Popen[bytes]:
    """A second CPU-bound job for --busy: spins until it is killed."""
    return subprocess.Popen([PYTHON, "-S", "-c", "while True: pass"])


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    producer = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    consumer = subprocess.Popen(["cat"], stdin=producer.stdout, stdout=subprocess.DEVNULL)
    producer.stdout.close()
    if consumer.wait() != 0 or producer.wait() != 0:
        raise RuntimeError(f"failed: {' '.join(argv)}")
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--mib", type=int, default=100)
    parser.add_argument("--chunk", type=parse_size, default=65536,
                        help="bytes per write (64KiB, 1MiB)")
    parser.add_argument("--busy", action="store_true",
                        help="run a spinning process alongside every case")
    parser.add_argument("--only", default="",
                        help="comma-separated cases to run (python3 is always run)")
    parser.add_argument("--compare", metavar="PATH",
                        help="another build's pysandbox, its cases in the same rounds (@compare)")
    parser.add_argument("--pysandbox", default=os.environ.get(
        "PYSANDBOX", str(REPO / "build" / "bin" / "pysandbox")))
    args = parser.parse_args()

    spinner = start_spinner() if args.busy else None
    try:
        samples = measure(args)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()

    bare = statistics.median(samples["python3"])
    print(f"{args.mib} MiB to a pipe in {args.chunk}-byte writes, {args.rounds} interleaved "
          f"rounds, {os.cpu_count()} CPUs{', one busy with a spinner' if args.busy else ''}")
    # x bwrap: the median over rounds of each round's own ratio to bwrap's time in that round,
    # which is steadier on a shared machine than a ratio of medians.
    bwrap = samples.get("bwrap")
    print(f"{'case':<26} {'median s':>9} {'MB/s':>8} {'x bare':>7}"
          + (f" {'x bwrap':>8}" if bwrap else ""))
    for name, values in samples.items():
        median = statistics.median(values)
        line = (f"{name:<26} {median:>9.3f} {args.mib * 1.048576 / median:>8.0f} "
                f"{median / bare:>7.2f}")
        if bwrap:
            line += f" {statistics.median(v / b for v, b in zip(values, bwrap)):>8.3f}"
        print(line)
    return 0


def measure(args: argparse.Namespace) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as directory:
        flood = flood_script(directory, args.mib, args.chunk)
        cases = {
            "python3": [PYTHON, "-s", flood],
            "bwrap": startup.bwrap_command(bwrap, Path(flood)) if (bwrap := shutil.which("bwrap"))
            else [],
        }
        for label, pysandbox in [("", args.pysandbox)] + (
                [("@compare", args.compare)] if args.compare else []):
            run = [pysandbox, "run", "--timeout", "60s"]
            cases.update({
                "pysandbox" + label: run + ["--output-limit", "1GiB", flood],
                "pysandbox --json" + label: run + ["--json", flood],
                "--json 1GiB" + label: run + ["--json", "--output-limit", "1GiB", flood],
                "pysandbox capped" + label: run + ["--output-limit", "1MiB", flood],
            })
        only = {name.strip() for name in args.only.split(",") if name.strip()}
        cases = {name: argv for name, argv in cases.items()
                 if argv and (not only or name.removesuffix("@compare") in only
                              or name == "python3")}
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for argv in cases.values():
            timed(argv)  # warm-up, and a check that each case works
        for round_number in range(args.rounds):
            names = list(cases)
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                samples[name].append(timed(cases[name]))
    return samples


if __name__ == "__main__":
    raise SystemExit(main())
