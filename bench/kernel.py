#!/usr/bin/env python3
"""`pysandbox kernel` next to Debian's ipykernel, through the same jupyter_client.

Two kernels, each started from a kernelspec in a scratch JUPYTER_PATH, driven by one client
library (Debian's python3-jupyter-client) as notebook front ends and nbclient drive them:

  pysandbox   pysandbox kernel -f CONNECTION_FILE -p PROFILE     cells in a sandboxed session
  ipykernel   /usr/bin/python3 -m ipykernel_launcher -f FILE     no isolation (python3-ipykernel)

Timed, interleaved so that a slow moment of the machine hits both alike (which kernel goes first
alternates):

  round trip  a cell (`1+1` unless --code): from sending its execute_request to reading its
              execute_reply; its iopub messages are read after, untimed. With --until-idle,
              to reading its idle status on iopub instead: every output message it sent
              received, as a notebook shows them (for a cell that prints much, e.g.
              --code "import sys; sys.stdout.write('x' * 2**20)" --until-idle)
  start       --starts times: from starting the kernel to the execute_reply of its first cell
              (after the kernel_info round trip every client makes first)

Prints the median, 90th percentile and minimum in milliseconds, and pysandbox's median as a
ratio to ipykernel's.

    bench/kernel.py [--rounds 200] [--warmup 3] [--starts 3] [--pysandbox PATH]
                    [--profile NAME] [--code CODE] [--until-idle] [--json]

Needs python3-jupyter-client and python3-ipykernel. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from startup import PYTHON, machine, parse_options, percentile  # noqa: E402

ANSWER = 60  # seconds any one reply may take


def write_kernelspecs(directory: Path, pysandbox: str, profile: str) -> None:
    specs = {
        "pysandbox": [pysandbox, "kernel", "-f", "{connection_file}", "-p", profile],
        "ipykernel": [PYTHON, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
    }
    for name, argv in specs.items():
        spec = directory / "kernels" / name
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": argv, "display_name": name, "language": "python",
            "interrupt_mode": "message"}))


class Kernel:
    """One started kernel and its blocking client."""

    def __init__(self, name: str):
        import jupyter_client

        self.start = time.perf_counter_ns()
        self.manager = jupyter_client.KernelManager(kernel_name=name)
        self.manager.start_kernel()
        self.client = self.manager.client()
        self.client.start_channels()
        # A kernel_info round trip, as every client makes first: iopub is subscribed after it.
        self.client.wait_for_ready(timeout=ANSWER)

    def cell(self, code: str, until_idle: bool = False) -> float:
        """Milliseconds from sending the execute_request to reading its execute_reply (or,
        `until_idle`, its idle status on iopub); the iopub messages up to its idle status are
        read after, untimed, unless `until_idle`."""
        start = time.perf_counter_ns()
        msg_id = self.client.execute(code)
        while True:  # wait_for_ready may have left a kernel_info_reply or two before it
            reply = self.client.get_shell_msg(timeout=ANSWER)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        elapsed = (time.perf_counter_ns() - start) / 1e6
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"{code!r} failed: {reply['content']}")
        while True:
            msg = self.client.get_iopub_msg(timeout=ANSWER)
            if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "idle"):
                return (time.perf_counter_ns() - start) / 1e6 if until_idle else elapsed

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def first_reply(name: str, code: str) -> float:
    """Milliseconds from starting a kernel to its first cell's execute_reply."""
    kernel = Kernel(name)
    try:
        kernel.cell(code)
        return (time.perf_counter_ns() - kernel.start) / 1e6
    finally:
        kernel.close()


def measure(code: str, rounds: int, warmup: int, starts: int,
            until_idle: bool) -> dict[str, list[float]]:
    names = ["pysandbox", "ipykernel"]
    samples: dict[str, list[float]] = {f"{name} {what}": [] for what in ("round trip", "start")
                                       for name in names}
    for number in range(starts):
        for name in names[number % 2:] + names[:number % 2]:
            samples[f"{name} start"].append(first_reply(name, code))
    kernels = {name: Kernel(name) for name in names}
    try:
        for kernel in kernels.values():  # both must work before anything is timed
            for _ in range(max(warmup, 1)):
                kernel.cell(code)
        for number in range(rounds):
            for name in names[number % 2:] + names[:number % 2]:
                samples[f"{name} round trip"].append(kernels[name].cell(code, until_idle))
    finally:
        for kernel in kernels.values():
            kernel.close()
    return samples


def summarize(samples: dict[str, list[float]]) -> list[dict]:
    rows = []
    for key, values in samples.items():
        if not values:
            continue
        name, what = key.split(" ", 1)
        base = statistics.median(samples[f"ipykernel {what}"])
        median = statistics.median(values)
        rows.append({"kernel": name, "what": what, "median_ms": median,
                     "p90_ms": percentile(values, 0.9), "min_ms": min(values),
                     "x_ipykernel": median / base, "samples": len(values)})
    return rows


def print_table(rows: list[dict], code: str, profile: str, rounds: int) -> None:
    print(f"{code!r}, {rounds} interleaved rounds, profile {profile}; {machine()}")
    header = (f"{'kernel':<10} {'what':<11} {'median ms':>10} {'p90 ms':>8} {'min ms':>8} "
              f"{'x ipykernel':>12} {'n':>4}")
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row['kernel']:<10} {row['what']:<11} {row['median_ms']:>10.2f} "
              f"{row['p90_ms']:>8.2f} {row['min_ms']:>8.2f} {row['x_ipykernel']:>12.3f} "
              f"{row['samples']:>4}")


def more_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default="default", help="pysandbox's profile")
    parser.add_argument("--code", default="1+1", help="the cell (default: 1+1)")
    parser.add_argument("--starts", type=int, default=3,
                        help="kernel starts timed, each (default 3; 0 for none)")
    parser.add_argument("--until-idle", action="store_true",
                        help="time each cell to its idle status (all its output received)")


def main() -> int:
    options = parse_options(__doc__.splitlines()[0], 200, more_options)
    missing = [name for name in ("jupyter_client", "ipykernel") if not find_spec(name)]
    if missing:
        print(f"kernel.py: no {' or '.join(missing)}: apt-get install python3-jupyter-client "
              "python3-ipykernel", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="pysandbox-bench-kernel-") as scratch:
        write_kernelspecs(Path(scratch), os.path.abspath(options.pysandbox), options.profile)
        os.environ.update(JUPYTER_PATH=scratch, JUPYTER_RUNTIME_DIR=scratch,
                          JUPYTER_PLATFORM_DIRS="1")
        try:
            samples = measure(options.code, options.rounds, options.warmup, options.starts,
                              options.until_idle)
        except (RuntimeError, OSError) as error:
            print(f"kernel.py: {error}", file=sys.stderr)
            return 1
    rows = summarize(samples)
    if options.json:
        json.dump({"rounds": options.rounds, "profile": options.profile, "code": options.code,
                   "until_idle": options.until_idle, "rows": rows, "samples_ms": samples},
                  sys.stdout, indent=2)
        print()
    else:
        print_table(rows, options.code, options.profile, options.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
