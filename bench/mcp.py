#!/usr/bin/env python3
"""Latency of `pysandbox mcp`'s run_python, measured at the client, next to a cold start.

One server (`pysandbox mcp -p default -p datascience --pool N`) gets a run_python call every
`--gap` seconds (so the pool has started the next sandbox, as when an agent thinks between
calls). Interleaved with the calls, in the same rounds, the same code runs cold: bare
`python3 -c` and `pysandbox run -c`. Prints median and 90th percentile in milliseconds, and each
one's ratio to bare python3.

    bench/mcp.py [--rounds 30] [--gap 1.0] [--pool 1] [--pysandbox PATH] [--baseline PATH]
                 [--json]

--baseline PATH: a second server, of another build (an older one), gets the same calls in the
same rounds, each round's order of the two servers rotated; its rows say "(baseline)". The load
average is printed at the start and the end (the machine's other work moves these numbers).

Cases: print(1) under default; `import pandas; print(pandas.__version__)` under datascience.
Standard library only.
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

REPO = Path(__file__).resolve().parent.parent
PYTHON = "/usr/bin/python3"
CASES = [
    ("print(1)", "default", "print(1)"),
    ("import pandas", "datascience", "import pandas; print(pandas.__version__)"),
]


class Server:
    """A `pysandbox mcp` child spoken to over raw JSON-RPC lines."""

    def __init__(self, argv: list[str]) -> None:
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self.notify("notifications/initialized")

    def notify(self, method: str) -> None:
        self._send({"jsonrpc": "2.0", "method": method})

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        line = self.process.stdout.readline()
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["result"]

    def _send(self, message: dict) -> None:
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def cold(argv: list[str]) -> None:
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--gap", type=float, default=1.0, help="seconds between MCP calls")
    parser.add_argument("--pool", type=int, default=1)
    parser.add_argument("--pysandbox",
                        default=os.environ.get("PYSANDBOX", str(REPO / "build/bin/pysandbox")))
    parser.add_argument("--baseline", help="another build's pysandbox, called in the same rounds")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    def start(pysandbox: str) -> Server:
        return Server([pysandbox, "mcp", "-p", "default", "-p", "datascience",
                       "--pool", str(args.pool)])

    servers = [("", start(args.pysandbox))]
    if args.baseline:
        servers.append((" (baseline)", start(args.baseline)))
    load_before = os.getloadavg()
    samples: dict[str, list[float]] = {}
    try:
        # An untimed first call of each case to each server: the pools' first sandboxes start
        # (at once, and on a loaded machine datascience's takes seconds), and the calls after
        # are warm ones.
        for label, profile, code in CASES:
            for _, server in servers:
                server.request("tools/call", {"name": "run_python",
                                              "arguments": {"code": code, "profile": profile}})
        time.sleep(args.gap)
        for turn in range(args.rounds):
            for label, profile, code in CASES:
                order = servers[turn % len(servers):] + servers[:turn % len(servers)]
                for suffix, server in order:
                    if server is not order[0][1]:
                        time.sleep(args.gap)  # the one before refills its pool
                    def call(server: Server = server) -> None:
                        result = server.request("tools/call", {
                            "name": "run_python", "arguments": {"code": code, "profile": profile}})
                        if result["structuredContent"]["status"] != "ok":
                            raise RuntimeError(result["content"][0]["text"])
                    samples.setdefault(f"{label}: mcp warm{suffix}", []).append(timed(call))
                samples.setdefault(f"{label}: python3 -c", []).append(
                    timed(lambda: cold([PYTHON, "-c", code])))
                samples.setdefault(f"{label}: pysandbox run", []).append(
                    timed(lambda: cold([args.pysandbox, "run", "-p", profile, "-c", code])))
                time.sleep(args.gap)
    finally:
        for _, server in servers:
            server.close()

    rows = []
    for name, values in samples.items():
        label = name.split(":")[0]
        base = statistics.median(samples[f"{label}: python3 -c"])
        median = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1] if len(values) > 1 else median
        rows.append({"case": name, "median_ms": round(median, 2), "p90_ms": round(p90, 2),
                     "ratio": round(median / base, 3)})
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        print()
        return 0
    print(f"{args.rounds} rounds, a call every {args.gap} s, --pool {args.pool}; load average "
          f"{load_before[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    for row in rows:
        print(f"  {row['case']:<34} median {row['median_ms']:8.2f} ms   p90 {row['p90_ms']:8.2f} ms"
              f"   x{row['ratio']:.2f} of python3 -c")
    return 0


if __name__ == "__main__":
    sys.exit(main())
