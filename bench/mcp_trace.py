#!/usr/bin/env python3
"""Where a warm MCP run_python call's time goes, from the client's write to the answer read.

Each build named (LABEL=PATH, built with bench/mcp_trace.patch) serves one `pysandbox mcp -p
default --pool 1` that gets a `print(1)` call every `--gap` seconds, the builds in turn, the
order rotated each round. The patch has the server write one line per call with the time it
passed each step (CLOCK_MONOTONIC, as time.monotonic_ns() here) and the driver add when it read
the cell and when it sent `done`. Prints the median of each step in milliseconds, per build, and
the server's CPU time per call (its own process: parse, hand-off, result, and its pool's
replacements cloned). The patch is for this measurement only, never for a build anyone runs.

    git worktree add /tmp/trace HEAD && git -C /tmp/trace apply bench/mcp_trace.patch
    cmake -S /tmp/trace -B /tmp/trace/build -G Ninja -DBUILD_TESTING=OFF
    ninja -C /tmp/trace/build pysandbox pycache
    bench/mcp_trace.py [--calls 40] [--gap 0.3] new=/tmp/trace/build/bin/pysandbox [old=...]

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# (what, from, to): the marks of the patch; t0 and t1 are the client's write and read.
STEPS = [
    ("arrival: the client's write to the line read", "t0", "line"),
    ("JSON-RPC: the line parsed", "line", "parsed"),
    ("JSON-RPC routed, arguments checked; pool hand-off", "parsed", "taken"),
    ("cell message built and queued", "taken", "ctl_sent"),
    ("cell: written, the driver woken, the message read", "ctl_sent", "drv_recv"),
    ("cell: run in the driver, to its done sent", "drv_recv", "drv_send"),
    ("cell: done received by the server", "drv_send", "done"),
    ("(the server after queuing it: the cell's clocks)", "ctl_sent", "sent"),
    ("hand-off: the sandbox taken to the cell read", "taken", "drv_recv"),
    ("outcome: output cut, usage, the artifact walk", "done", "outcome"),
    ("result built (result_json, the incident log)", "outcome", "cell_result"),
    ("rendered (run_result: text, structuredContent)", "result", "rendered"),
    ("queued and written to stdout", "rendered", "written"),
    ("the client reads it", "written", "t1"),
    ("arrival to answer written, in the server", "line", "written"),
    ("at the client", "t0", "t1"),
]


class Server:
    def __init__(self, path: str, log: str) -> None:
        self.log = log
        with open(log, "w") as err:
            self.process = subprocess.Popen([path, "mcp", "-p", "default", "--pool", "1"],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=err)
        self.calls: list[tuple[int, int]] = []
        self.request(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                       "clientInfo": {"name": "bench", "version": "1"}})

    def request(self, number: int, method: str, params: dict) -> dict:
        line = json.dumps({"jsonrpc": "2.0", "id": number, "method": method,
                           "params": params}).encode() + b"\n"
        assert self.process.stdin is not None and self.process.stdout is not None
        start = time.monotonic_ns()
        self.process.stdin.write(line)
        self.process.stdin.flush()
        reply = json.loads(self.process.stdout.readline())
        if method == "tools/call":
            self.calls.append((start, time.monotonic_ns()))
            if reply["result"]["structuredContent"]["status"] != "ok":
                raise RuntimeError(reply["result"]["content"][0]["text"])
        return reply

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.process.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)

    def marks(self) -> list[dict[str, int]]:
        with open(self.log) as log:
            lines = [line.split()[1:] for line in log if line.startswith("TP ")]
        calls = []
        for fields, (start, end) in zip(lines[-len(self.calls):], self.calls):
            marks = {name: int(value) for name, value in (f.split("=", 1) for f in fields)}
            calls.append({**marks, "t0": start, "t1": end})
        return calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--gap", type=float, default=0.3, help="seconds between calls")
    parser.add_argument("builds", nargs="+", help="LABEL=PATH of a pysandbox with the patch")
    args = parser.parse_args()

    logs = tempfile.mkdtemp(prefix="mcp-trace-")
    builds = [build.split("=", 1) for build in args.builds]
    servers = {label: Server(path, os.path.join(logs, label + ".log")) for label, path in builds}
    labels = list(servers)
    time.sleep(1)  # the pools' first sandboxes start
    load = os.getloadavg()[0]
    cpu = {label: server.cpu_seconds() for label, server in servers.items()}
    for call in range(args.calls):
        turn = call % len(labels)
        for label in labels[turn:] + labels[:turn]:
            servers[label].request(call + 1, "tools/call", {
                "name": "run_python", "arguments": {"code": "print(1)"}})
            time.sleep(args.gap)
    cpu = {label: server.cpu_seconds() - cpu[label] for label, server in servers.items()}
    for server in servers.values():
        server.close()

    print(f"{args.calls} calls each, one every {args.gap} s; load average {load:.1f} at the "
          f"start, {os.getloadavg()[0]:.1f} at the end")
    print(f"{'median, ms':52}" + "".join(f"{label:>10}" for label in labels))
    marks = {label: server.marks() for label, server in servers.items()}
    for what, start, end in STEPS:
        row = f"{what:52}"
        for label in labels:
            spans = [(m[end] - m[start]) / 1e6 for m in marks[label] if start in m and end in m]
            row += f"{statistics.median(spans):10.3f}" if spans else f"{'-':>10}"
        print(row)
    print(f"{'the server CPU per call (and its refills)':52}" +
          "".join(f"{cpu[label] * 1000 / args.calls:10.2f}" for label in labels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
