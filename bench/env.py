#!/usr/bin/env python3
"""What package environments cost (issue 29), side by side in one interleaved run.

Five tiny wheels (built here, as the tests build theirs: tests/support/wheels.py) in a
wheelhouse; one environment of all five made once up front. Each round runs every case once, in
an order shuffled each round (a rotation would keep each case after the same neighbour, and the
installs leave the machine busier for a moment):

  run                       pysandbox run -c CODE                      no environment
  run --with-env            pysandbox run --with-env ID -c CODE        the cached environment
  run --with (cached)       pysandbox run --with P0..P4 --find-links H -c CODE   found in the store
  run --with-env, import    pysandbox run --with-env ID -c IMPORTS     and the five imported
  mcp warm, import          run_python(IMPORTS) to `pysandbox mcp --with-env ID`, warm
  env create                pysandbox env create --find-links H P0..P4, a fresh store each time
  venv + pip install        python3 -m venv V && V/bin/pip install --no-index --find-links H ...
  pip install --target      python3 -m pip install --target T --no-index --find-links H ...

The last one does what pip does inside `env create`, on the host with no sandbox: the strict
floor. Prints median and 90th percentile in ms and the ratios the issue sets targets for:
run --with-env / run <= 1.05, env create / venv + pip install <= 1.5, mcp warm / cold run with
the environment <= 0.3; each as the ratio of the medians and as the median of each round's own
ratio.

    bench/env.py [--rounds 15] [--gap 0.5] [--only a,b,c] [--pysandbox PATH] [--json]

--only picks the issue's comparisons: a (the three `run` cases without an import), b (the three
installs), c (the two with the import); the others are not run.

Standard library only (and Debian's python3-venv and python3-pip for the baselines). Run as
root or as an ordinary user; say which when you quote the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from support.wheels import make_wheel  # noqa: E402  (the tests' wheels, not a copy)
from mcp import Server  # noqa: E402  (bench/mcp.py's client: bench/ is sys.path[0])

PYTHON = "/usr/bin/python3"
PACKAGES = [f"benchpkg{i}" for i in range(5)]
CODE = "print(1)"
IMPORTS = f"import {', '.join(PACKAGES)}; print({' + '.join(p + '.VALUE' for p in PACKAGES)})"
GROUP = {"run": "a", "run --with-env": "a", "run --with (cached)": "a",
         "env create": "b", "venv + pip install": "b", "pip install --target": "b",
         "run --with-env, import": "c", "mcp warm, import": "c"}
PIP_FLAGS = ["--no-index", "--no-cache-dir", "--disable-pip-version-check", "--no-input",
             "--progress-bar", "off", "-q"]


def quiet(argv: list[str]) -> None:
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr[-800:]!r}")


def private_dir(parent: str) -> str:
    """A directory under `parent` that only its owner can write (the store refuses others') and
    that the sandbox's uid can read."""
    path = tempfile.mkdtemp(dir=parent)
    os.chmod(path, 0o755)
    return path


def run_python(server: Server, code: str) -> None:
    result = server.request("tools/call", {"name": "run_python", "arguments": {"code": code}})
    if result["structuredContent"]["status"] != "ok":
        raise RuntimeError(result["content"][0]["text"])


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--gap", type=float, default=0.5,
                        help="seconds after each MCP call, untimed (the pool starts the next)")
    parser.add_argument("--pysandbox",
                        default=os.environ.get("PYSANDBOX", str(REPO / "build/bin/pysandbox")))
    parser.add_argument("--only", default="a,b,c", help="comparisons to run: a, b, c")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    binary = args.pysandbox
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally below cleans up

    top = tempfile.mkdtemp(prefix="pysandbox-bench-env-")
    os.chmod(top, 0o755)
    server = None
    try:
        house = private_dir(top)
        for i, name in enumerate(PACKAGES):
            make_wheel(Path(house), name, "1.0", {f"{name}/__init__.py": f"VALUE = {i}\n"})
        store = private_dir(top)
        cache = ["--cache-dir", store]
        create = [binary, "env", "create", "--find-links", house, *PACKAGES]
        made = subprocess.run([*create, *cache], check=True, capture_output=True)
        env_id = made.stdout.decode().strip()
        with_env = [binary, "run", "--with-env", env_id, *cache]
        server = Server([binary, "mcp", "--with-env", env_id, *cache])
        elapsed: list[float] = []  # what a `fresh` case timed itself

        def fresh(argv: Callable[[str], list[str]]) -> Callable[[], None]:
            """A case that works in a new directory each time, removed untimed afterwards."""
            def case() -> None:
                directory = private_dir(top)
                try:
                    start = time.perf_counter()
                    quiet(argv(directory))
                    elapsed.append(time.perf_counter() - start)
                finally:
                    shutil.rmtree(directory)
            return case

        cases: dict[str, Callable[[], None]] = {
            "run": lambda: quiet([binary, "run", *cache, "-c", CODE]),
            "run --with-env": lambda: quiet([*with_env, "-c", CODE]),
            "run --with (cached)": lambda: quiet(
                [binary, "run", *cache, "--find-links", house,
                 *(a for p in PACKAGES for a in ("--with", p)), "-c", CODE]),
            "run --with-env, import": lambda: quiet([*with_env, "-c", IMPORTS]),
            "mcp warm, import": lambda: run_python(server, IMPORTS),
            "env create": fresh(lambda d: [*create, "--cache-dir", d]),
            "venv + pip install": fresh(lambda d: [
                "sh", "-c", f'{PYTHON} -m venv "$1/v" && "$1/v/bin/python" -m pip install '
                f'{" ".join(PIP_FLAGS)} --find-links "$2" {" ".join(PACKAGES)}', "sh", d, house]),
            "pip install --target": fresh(lambda d: [
                PYTHON, "-m", "pip", "install", "--target", d + "/site", "--no-compile",
                *PIP_FLAGS, "--find-links", house, *PACKAGES]),
        }
        wanted = set(args.only.split(","))
        cases = {name: case for name, case in cases.items() if GROUP[name] in wanted}
        samples: dict[str, list[float]] = {name: [] for name in cases}

        def timed(name: str) -> None:
            elapsed.clear()
            start = time.perf_counter()
            cases[name]()
            samples[name].append(elapsed[0] if elapsed else time.perf_counter() - start)
            if name.startswith("mcp"):
                time.sleep(args.gap)

        for name in cases:  # warm-up, and a check that each case works
            timed(name)
        for name in cases:
            samples[name].clear()
        order = random.Random(29)
        for _ in range(args.rounds):
            names = list(cases)
            order.shuffle(names)
            for name in names:
                timed(name)
    finally:
        if server:
            server.close()
        shutil.rmtree(top, ignore_errors=True)

    median = {name: statistics.median(values) * 1000 for name, values in samples.items()}
    pairs = [("run --with-env", "run", 1.05),
             ("run --with (cached)", "run", None),
             ("env create", "venv + pip install", 1.5),
             ("env create", "pip install --target", None),
             ("mcp warm, import", "run --with-env, import", 0.3)]
    ratios = [(f"{a} / {b}", median[a] / median[b],
               statistics.median(x / y for x, y in zip(samples[a], samples[b])), target)
              for a, b, target in pairs if a in samples and b in samples]
    if args.json:
        json.dump({"rounds": args.rounds, "uid": os.getuid(),
                   "rows": [{"case": name, "median_ms": round(median[name], 2),
                             "p90_ms": round(p90(values) * 1000, 2),
                             "samples_ms": [round(v * 1000, 2) for v in values]}
                            for name, values in samples.items()],
                   "ratios": [{"ratio": n, "of_medians": round(v, 3),
                               "median_of_rounds": round(r, 3), "target": t}
                              for n, v, r, t in ratios]}, sys.stdout, indent=2)
        print()
        return 0
    print(f"{args.rounds} interleaved rounds, uid {os.getuid()}, {os.cpu_count()} CPUs, "
          "5 wheels")
    print(f"{'case':<24} {'median ms':>10} {'p90 ms':>8}")
    for name, values in samples.items():
        print(f"{name:<24} {median[name]:>10.1f} {p90(values) * 1000:>8.1f}")
    print(f"{'ratio':<46} {'of medians':>10} {'per round':>10}")
    for name, value, per_round, target in ratios:
        verdict = "" if target is None else f"  target <= {target}: " + (
            "met" if max(value, per_round) <= target else "missed")
        print(f"{name:<46} {value:>10.3f} {per_round:>10.3f}{verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
