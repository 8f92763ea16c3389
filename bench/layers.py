#!/usr/bin/env python3
"""What pysandbox's security layers cost at start-up, next to what the rest of pysandbox costs.

pysandbox built with bench/layers.patch runs hello.py twice per round: as is, and with every
layer switched off (PYSANDBOX_ABLATE names the steps to skip, and the profile has no [policy]);
bare python, the floor (bench/floor.c), bubblewrap and the pysandbox under test run in the same
interleaved rounds. The patch adds an environment switch that skips security steps: it is for
this measurement only and must never be applied to a build anyone runs.

    git worktree add /tmp/ablate HEAD && git -C /tmp/ablate apply bench/layers.patch
    cmake -S /tmp/ablate -B /tmp/ablate/build -G Ninja -DBUILD_TESTING=OFF && ninja -C /tmp/ablate/build
    bench/layers.py --ablated /tmp/ablate/build/bin/pysandbox [--rounds 150]

The layers switched off: seccomp, Landlock, no_new_privs and the capability drop, the /proc
masks, setsid, the script's rlimits, the session keyring, the blanked command line, the CPU
affinity and the [policy] audit hook. What is left is pysandbox's own work: the command line,
the profile and the plan, the mounts, init, the supervisor and the teardown.
Standard library only.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import startup

LAYERS = ("proc masks,start a new session,restrict the filesystem (Landlock),drop capabilities,"
          "set no_new_privs,load the seccomp filter,set the script's resource limits,"
          "limit open files,join a fresh session keyring,blank the caller's command line,"
          "pin to the allowed CPUs")


def profile_without_policy(directory: str, ablated: str) -> str:
    """The shipped default profile minus its [policy] table (no audit hook)."""
    source = Path(ablated).resolve().parent.parent / "share/pysandbox/profiles/default.toml"
    text = source.read_text()
    path = os.path.join(directory, "no-policy.toml")
    Path(path).write_text(text[:text.index("[policy]")])
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ablated", required=True, help="pysandbox built with bench/layers.patch")
    parser.add_argument("--pysandbox", default=os.environ.get(
        "PYSANDBOX", str(startup.REPO / "build/bin/pysandbox")))
    parser.add_argument("--rounds", type=int, default=150)
    args = parser.parse_args()

    floor, why = startup.floor_binary()
    if not floor:
        raise SystemExit(why)
    env = dict(startup.CHILD_ENV)
    hello = str(startup.HELLO)
    with tempfile.TemporaryDirectory() as directory:
        os.chmod(directory, 0o755)
        no_policy = profile_without_policy(directory, args.ablated)
        tools = {
            "python3": ([startup.PYTHON, hello], env),
            "floor": ([floor, hello], env),
            "bwrap": (startup.bwrap_command("bwrap"), env),
            "pysandbox": ([args.pysandbox, "run", hello], env),
            "patched, all layers": ([args.ablated, "run", hello], env),
            "patched, no layers": ([args.ablated, "run", "-p", no_policy, hello],
                                   dict(env, PYSANDBOX_ABLATE=LAYERS)),
        }
        samples = measure(tools, args.rounds)
    bare = statistics.median(samples["python3"])
    floor_ratio = statistics.median(samples["floor"]) / bare
    print(f"hello.py, {args.rounds} interleaved rounds, medians")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"{name:22s} {median:6.2f} ms  x{median / bare:.3f}  "
              f"{100 * (median / bare / floor_ratio - 1):+5.1f} % of the floor's ratio")
    layers = (statistics.median(samples["patched, all layers"]) -
              statistics.median(samples["patched, no layers"]))
    print(f"the layers: {layers:.2f} ms")
    return 0


def run_once(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter_ns()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=env,
                          cwd=startup.BENCH, timeout=60)
    if done.returncode != 0 or done.stdout != startup.EXPECTED_STDOUT:
        raise RuntimeError(f"{argv}: exit {done.returncode}: {done.stderr[-1000:]!r}")
    return (time.perf_counter_ns() - start) / 1e6


def measure(tools: dict[str, tuple[list[str], dict[str, str]]],
            rounds: int) -> dict[str, list[float]]:
    names = list(tools)
    for name in names:
        run_once(*tools[name])
    samples: dict[str, list[float]] = {name: [] for name in names}
    # A new order each round: the two runs of the patched binary must not always follow each
    # other (the second would always find the first's pages warm).
    shuffle = random.Random(15).shuffle
    for _ in range(rounds):
        order = list(names)
        shuffle(order)
        for name in order:
            samples[name].append(run_once(*tools[name]))
    return samples


if __name__ == "__main__":
    sys.exit(main())
