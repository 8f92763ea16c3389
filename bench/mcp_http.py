#!/usr/bin/env python3
"""run_python over Streamable HTTP (`pysandbox mcp --http`) next to the same call over stdio.

Two servers (`pysandbox mcp --pool 1`, one on stdio, one with `--http 0`) get the same calls,
in interleaved rounds, measured at the client from the request's first byte to the response's
last: a cell in a session (`1`), and a one-shot call `--gap` seconds after the last (so the pool
has its warm sandbox ready, as when an agent thinks between calls). Prints median and 90th
percentile in milliseconds and HTTP's median over stdio's.

    bench/mcp_http.py [--rounds 100] [--gap 0.3] [--pysandbox PATH]

The HTTP client keeps one connection (keep-alive), as the SDK's does. Standard library only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HELLO = {"protocolVersion": "2025-06-18", "capabilities": {},
         "clientInfo": {"name": "bench", "version": "1"}}


class Stdio:
    def __init__(self, binary: str) -> None:
        self.process = subprocess.Popen([binary, "mcp", "--pool", "1"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE)
        self.next_id = 0

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        while True:
            answer = json.loads(self.process.stdout.readline())
            if answer.get("id") == self.next_id:
                return answer

    def notify(self, method: str) -> None:
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.process.stdin.flush()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


class Http:
    def __init__(self, binary: str) -> None:
        self.process = subprocess.Popen([binary, "mcp", "--pool", "1", "--http", "0"],
                                        stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        line = self.process.stderr.readline().decode()
        found = re.search(r"http://([^/\s]+)(/mcp)", line)
        if not found:
            raise RuntimeError(f"the HTTP server said: {line!r}")
        host, port = found.group(1).rsplit(":", 1)
        self.connection = http.client.HTTPConnection(host, int(port))
        self.session = ""
        self.next_id = 0

    def post(self, message: dict) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        self.connection.request("POST", "/mcp", json.dumps(message), headers)
        response = self.connection.getresponse()
        body = response.read()
        self.session = response.getheader("Mcp-Session-Id") or self.session
        return response.status, body

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        status, body = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                  "params": params})
        if status != 200:
            raise RuntimeError(f"{method}: HTTP {status}: {body[:200]!r}")
        return json.loads(body)

    def notify(self, method: str) -> None:
        self.post({"jsonrpc": "2.0", "method": method})

    def close(self) -> None:
        self.connection.close()
        self.process.terminate()
        self.process.wait()


def run(server, arguments: dict) -> float:
    start = time.perf_counter()
    answer = server.request("tools/call", {"name": "run_python", "arguments": arguments})
    elapsed = (time.perf_counter() - start) * 1000
    if answer["result"].get("isError"):
        raise RuntimeError(f"the call failed: {answer}")
    return elapsed


def p90(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=10, method="inclusive")[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--gap", type=float, default=0.3)
    parser.add_argument("--pysandbox",
                        default=os.environ.get("PYSANDBOX", str(REPO / "build/bin/pysandbox")))
    options = parser.parse_args()
    servers = {"stdio": Stdio(options.pysandbox), "http": Http(options.pysandbox)}
    sessions = {}
    for name, server in servers.items():
        server.request("initialize", HELLO)
        server.notify("notifications/initialized")
        started = server.request("tools/call", {"name": "start_session", "arguments": {}})
        sessions[name] = started["result"]["structuredContent"]["session_id"]
    cells = {name: [] for name in servers}
    one_shots = {name: [] for name in servers}
    for round_ in range(options.rounds):
        order = list(servers) if round_ % 2 == 0 else list(reversed(servers))
        for name in order:
            cells[name].append(run(servers[name], {"code": "1", "session_id": sessions[name]}))
        if round_ % 10 == 0:
            for name in order:
                time.sleep(options.gap)  # the pool's next sandbox starts meanwhile
                one_shots[name].append(run(servers[name], {"code": "1"}))
    for server in servers.values():
        server.close()
    for label, samples in (("session cell", cells), ("one-shot, warm", one_shots)):
        medians = {name: statistics.median(values) for name, values in samples.items()}
        for name, values in samples.items():
            print(f"{label:15} {name:6} median {medians[name]:7.2f} ms  p90 {p90(values):7.2f} ms")
        print(f"{label:15} http / stdio: {medians['http'] / medians['stdio']:.2f}")


if __name__ == "__main__":
    main()
