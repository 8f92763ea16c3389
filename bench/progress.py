#!/usr/bin/env python3
"""Streamed output: how long a flushed line takes from the script to the client.

The script, in the sandbox, prints `time.monotonic_ns()` with flush=True every `--gap` seconds
(the sandbox has no time namespace: its monotonic clock is the host's). The client notes its own
clock when the bytes reach it and takes the difference. Three ways, interleaved round by round in
a rotated order:

  mcp       `pysandbox mcp --pool 1`: a run_python call with _meta.progressToken; the lines come
            as notifications/progress
  session   `pysandbox session`: a cell with "stream": true; the lines come as event lines
  python3   bare `python3 -c` on a pipe: the floor (a pipe and a wake-up)

Prints median, p10, p90 and max in milliseconds per way, over every line of every round.

    bench/progress.py [--rounds 20] [--lines 10] [--gap 0.1] [--pysandbox PATH] [--json]

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = "/usr/bin/python3"


def script(lines: int, gap: float) -> str:
    return (f"import time\nfor _ in range({lines}):\n"
            f"    print(time.monotonic_ns(), flush=True)\n    time.sleep({gap})\n")


class Lines:
    """Lines of a child's stdout, each with the monotonic time its bytes were read."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.fd = process.stdout.fileno()
        self.buffer = b""

    def next(self, timeout: float = 30.0) -> tuple[int, bytes]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.fd], [], [], remaining)[0]:
                raise RuntimeError(f"no line within {timeout} s")
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise RuntimeError("the child's stdout ended")
            self.read_at = time.monotonic_ns()
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return self.read_at, line

    def send(self, message: dict) -> None:
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()


def delays(received_at: int, text: str) -> list[float]:
    return [(received_at - int(stamp)) / 1e6 for stamp in text.split()]


def via_mcp(server: Lines, code: str, call: int) -> list[float]:
    server.send({"jsonrpc": "2.0", "id": call, "method": "tools/call",
                 "params": {"name": "run_python", "arguments": {"code": code},
                            "_meta": {"progressToken": f"bench-{call}"}}})
    found = []
    while True:
        at, line = server.next()
        message = json.loads(line)
        if message.get("id") == call:
            if message["result"]["structuredContent"]["status"] != "ok":
                raise RuntimeError(message["result"]["content"][0]["text"])
            return found
        if message.get("method") == "notifications/progress":
            found += delays(at, message["params"]["message"])


def via_session(session: Lines, code: str, cell: int) -> list[float]:
    session.send({"id": cell, "code": code, "stream": True})
    found = []
    while True:
        at, line = session.next()
        message = json.loads(line)
        if "event" not in message:
            if message["status"] != "ok":
                raise RuntimeError(message)
            return found
        found += delays(at, message["data"])


def via_python(code: str) -> list[float]:
    process = subprocess.Popen([PYTHON, "-c", code], stdout=subprocess.PIPE)
    lines = Lines(process)
    found = []
    try:
        while True:
            try:
                at, line = lines.next()
            except RuntimeError:
                break  # its end
            found += delays(at, line.decode())
    finally:
        process.wait()
    return found


def start(argv: list[str]) -> Lines:
    return Lines(subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE))


def summary(values: list[float]) -> dict:
    deciles = statistics.quantiles(values, n=10)
    return {"n": len(values), "median_ms": round(statistics.median(values), 3),
            "p10_ms": round(deciles[0], 3), "p90_ms": round(deciles[-1], 3),
            "max_ms": round(max(values), 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--lines", type=int, default=10, help="flushed lines per run")
    parser.add_argument("--gap", type=float, default=0.1, help="seconds between the lines")
    parser.add_argument("--pysandbox",
                        default=os.environ.get("PYSANDBOX", str(REPO / "build/bin/pysandbox")))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    code = script(args.lines, args.gap)
    server = start([args.pysandbox, "mcp", "-p", "default", "--pool", "1"])
    server.send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                 "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": {"name": "bench", "version": "1"}}})
    server.next()
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    session = start([args.pysandbox, "session", "-p", "default"])
    ways = {
        "mcp progress": lambda n: via_mcp(server, code, n),
        "session stream": lambda n: via_session(session, code, n),
        "python3 pipe": lambda n: via_python(code),
    }
    samples: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for name, way in ways.items():  # warm-up, untimed
            way(0 if name != "mcp progress" else 10**6)
        names = list(ways)
        for round_number in range(1, args.rounds + 1):
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                found = ways[name](round_number)
                if len(found) != args.lines:
                    raise RuntimeError(f"{name}: {len(found)} lines, expected {args.lines}")
                samples[name] += found
    finally:
        for child in (server, session):
            child.process.stdin.close()
            child.process.wait(timeout=30)

    rows = {name: summary(values) for name, values in samples.items()}
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        print()
        return 0
    print(f"{args.rounds} rounds of {args.lines} lines, one every {args.gap} s: "
          "from the script's flush to the client's read, ms")
    for name, row in rows.items():
        print(f"  {name:<15} median {row['median_ms']:7.3f}   p10 {row['p10_ms']:7.3f}   "
              f"p90 {row['p90_ms']:7.3f}   max {row['max_ms']:7.3f}   (n={row['n']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
