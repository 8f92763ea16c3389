#!/usr/bin/python3
"""What the options say, the fronts do: every option `session`, `mcp` and `batch` (cloned and
--fork) accept is enforced there, judged from the host (each result's limits, the incident log
the host reads, the files and environment a job is given).

The limits are judged from each result's `limits`, which the watchdog enforces as `run` does
(test_limits and the security tests show each one enforced); what is shown here is that no front
drops a flag on the way to its sandboxes. The session-only options (--lifetime, --idle-timeout)
are test_session's and test_mcp_session_ends'.
"""
from __future__ import annotations

import json
import subprocess
import unittest

from harness import PYSANDBOX, SandboxTestCase, command_prefix, temp_dir, write_file

LIMIT_FLAGS = ["--timeout", "7s", "--cpu-time", "5s", "--memory", "300MiB", "--max-procs", "17",
               "--tmp-size", "40MiB", "--output-limit", "300KiB"]
LIMITS = {"wall_time_ms": 7000, "cpu_time_ms": 5000, "memory_bytes": 300 << 20, "max_procs": 17,
          "tmp_size_bytes": 40 << 20, "output_limit_bytes": 300 << 10}
DENIED = "import os\nos.system('true')"  # default profile: policy.deny_calls


def ndjson(command: list[str], lines: list[dict]) -> list[dict]:
    proc = subprocess.run(command_prefix() + [PYSANDBOX, *command],
                          input="".join(json.dumps(line) + "\n" for line in lines),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (command, proc.returncode, proc.stderr[-2000:])
    return [json.loads(line) for line in proc.stdout.splitlines()]


def mcp(options: list[str], calls: list[tuple[str, dict]]) -> list[dict]:
    """The results (structuredContent) of `calls`, each a tool name and its arguments, made in
    order; a start_session's session_id goes into the calls after it."""
    proc = subprocess.Popen(command_prefix() + [PYSANDBOX, "mcp", *options],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)

    def call(message_id: int, method: str, params: dict) -> dict:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "method": method,
                                     "params": params}) + "\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert answer.get("id") == message_id and "result" in answer, answer
        return answer["result"]

    try:
        call(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "test", "version": "1"}})
        results, session = [], None
        for n, (tool, arguments) in enumerate(calls, start=1):
            if session:
                arguments = dict(arguments, session_id=session)
            answer = call(n, "tools/call", {"name": tool, "arguments": arguments})
            if tool == "start_session":
                session = answer["structuredContent"]["session_id"]
            else:
                results.append(answer["structuredContent"])
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    return results


class FrontOptionsTest(SandboxTestCase):
    def setUp(self) -> None:
        self.dir = temp_dir()
        self.input = write_file(self.dir / "given.txt", "what the host gave\n")
        self.input.chmod(0o644)

    FRONTS = ("session", "batch", "batch --fork", "mcp", "mcp session")

    def test_limits_reach_every_front(self) -> None:
        for front in self.FRONTS:
            with self.subTest(front=front):
                result = self.results_of(front, LIMIT_FLAGS, "print('ran')")
                self.assertEqual(result["status"], "ok", result)
                limits = {key: result["limits"].get(key) for key in LIMITS}
                self.assertEqual(limits, LIMITS, result["limits"])

    def test_incident_log_is_written_by_every_front(self) -> None:
        for front in self.FRONTS:
            with self.subTest(front=front):
                log = self.dir / f"incidents-{front.replace(' ', '-')}.jsonl"
                log.touch()
                log.chmod(0o666)  # the unprivileged path's front appends to it
                result = self.results_of(front, ["--incident-log", str(log)], DENIED)
                self.assertEqual(result["status"], "policy_violation", result)
                lines = log.read_text().splitlines()
                self.assertEqual(len(lines), 1, lines)
                self.assertIn("os.system", lines[0])

    def test_inputs_reach_sessions_and_mcp_env_reaches_batch(self) -> None:
        read = "print(open('/tmp/work/given.txt').read(), end='')"
        for front in ("session", "mcp", "mcp session"):
            with self.subTest(front=front):
                result = self.results_of(front, ["--input", str(self.input)], read)
                self.assertEqual(result["stdout"], "what the host gave\n", result)
        env = "import os\nprint(os.environ.get('GIVEN'))"
        for front in ("batch", "batch --fork"):
            with self.subTest(front=front):
                result = self.results_of(front, ["--env", "GIVEN=by-the-host"], env)
                self.assertEqual(result["stdout"], "by-the-host\n", result)

    # One result from a way in: a session's cell, a batch job cloned or forked, an MCP call in a
    # sandbox of its own or in a session.
    def results_of(self, front: str, options: list[str], code: str) -> dict:
        request = {"id": 1, "code": code}
        if front == "session":
            return ndjson(["session", "--ndjson", *options], [request])[0]
        if front.startswith("batch"):
            fork = ["--fork"] if front.endswith("--fork") else []
            return ndjson(["batch", *fork, *options, "-"], [request])[0]
        calls = [("run_python", {"code": code})]
        if front == "mcp session":
            calls.insert(0, ("start_session", {}))
        return mcp(options, calls)[0]


if __name__ == "__main__":
    unittest.main()
