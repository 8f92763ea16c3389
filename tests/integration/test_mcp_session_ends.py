#!/usr/bin/python3
"""How an MCP server's sessions end: what --lifetime and --idle-timeout (limits.lifetime and
limits.idle_timeout) say, as `pysandbox session` ends; end_session while a cell runs; a signal
while calls run. Every call is answered, whichever way its session ended.

Driven over raw JSON-RPC on stdio; the answers are judged as a client reads them, the
sandboxes from the host (no sandbox outlives its session).
"""
from __future__ import annotations

import json
import signal
import subprocess
import time
import unittest

from harness import (PYSANDBOX, TIME_SLACK_SCALE, SandboxTestCase, command_prefix,
                     marked_profile, preload_marker, wait_for_no_leftovers)

SLEEP = "import time\ntime.sleep(60)"


class Server:
    """A server on stdio, initialized at the newest protocol: there, arguments a tool cannot take
    (a session that ended among them) are the tool's error (isError), as a model reads them."""

    def __init__(self, *options: str, marker: str):
        profile = marked_profile(marker, extra='[limits]\nwall_time = "60s"')
        self.proc = subprocess.Popen(
            command_prefix() + [PYSANDBOX, "mcp", "-p", str(profile), *options],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.next_id = 0
        self.send("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "test", "version": "1"}})
        self.read()
        self.notify("notifications/initialized")

    def notify(self, method: str, params: dict | None = None) -> None:
        self.write({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})

    def send(self, method: str, params: dict) -> int:
        self.next_id += 1
        self.write({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def tool(self, name: str, **arguments) -> int:
        return self.send("tools/call", {"name": name, "arguments": arguments})

    def write(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError("the server closed its stdout: " +
                                 self.proc.stderr.read().decode(errors="replace")[-2000:])
        return json.loads(line)

    def answer(self, request_id: int) -> dict:
        message = self.read()
        assert message.get("id") == request_id, message
        return message

    def start_session(self) -> str:
        return self.answer(self.tool("start_session"))["result"]["structuredContent"]["session_id"]

    def close(self) -> tuple[int, bytes]:
        try:
            rest, err = self.proc.communicate(timeout=30)  # closes stdin: the client is done
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode, rest + err


def text_of(answer: dict) -> str:
    return " ".join(block.get("text", "") for block in answer["result"].get("content", []))


class McpSessionEndTest(SandboxTestCase):
    def test_idle_timeout_ends_a_session_without_calls(self):
        marker = preload_marker()
        server = Server("--idle-timeout", "1s", "--lifetime", "60s", marker=marker)
        session = server.start_session()
        kept = server.answer(server.tool("run_python", code="x = 1", session_id=session))
        self.assertFalse(kept["result"]["isError"], kept)
        time.sleep(1.0 + 1.0 * TIME_SLACK_SCALE)
        late = server.answer(server.tool("run_python", code="print(x)", session_id=session))
        self.assertTrue(late["result"]["isError"], late)
        self.assertIn("idle_timeout", text_of(late))
        rc, _ = server.close()
        self.assertEqual(rc, 0)
        self.assertEqual(wait_for_no_leftovers(marker, 5.0), [])

    def test_lifetime_ends_a_session_and_answers_its_running_cell(self):
        marker = preload_marker()
        server = Server("--idle-timeout", "60s", "--lifetime", "2s", marker=marker)
        started = time.monotonic()
        session = server.start_session()
        running = server.answer(server.tool("run_python", code=SLEEP, session_id=session))
        elapsed = time.monotonic() - started
        self.assertTrue(running["result"]["isError"], running)
        self.assertIn("lifetime", text_of(running))
        self.assertNotEqual(running["result"]["structuredContent"]["status"], "ok")
        self.assertLess(elapsed, 2.0 + 3.0 * TIME_SLACK_SCALE, "the lifetime did not end the cell")
        after = server.answer(server.tool("run_python", code="print(1)", session_id=session))
        self.assertTrue(after["result"]["isError"], after)
        self.assertIn("lifetime", text_of(after))
        rc, _ = server.close()
        self.assertEqual(rc, 0)
        self.assertEqual(wait_for_no_leftovers(marker, 5.0), [])

    def test_end_session_answers_the_call_running_in_it(self):
        marker = preload_marker()
        server = Server(marker=marker)
        session = server.start_session()
        call = server.tool("run_python", code=SLEEP, session_id=session)
        time.sleep(0.5)  # the cell is running (it never ends by itself)
        ended = server.tool("end_session", session_id=session)
        answers = {message["id"]: message for message in (server.read(), server.read())}
        self.assertEqual(set(answers), {call, ended})
        self.assertTrue(answers[ended]["result"]["structuredContent"]["ended"])
        self.assertTrue(answers[call]["result"]["isError"], answers[call])
        self.assertIn("end_session", text_of(answers[call]))
        rc, _ = server.close()
        self.assertEqual(rc, 0)
        self.assertEqual(wait_for_no_leftovers(marker, 5.0), [])

    def test_a_signal_answers_every_call_in_flight(self):
        marker = preload_marker()
        server = Server(marker=marker)
        session = server.start_session()
        calls = {server.tool("run_python", code=SLEEP, session_id=session),
                 server.tool("run_python", code=SLEEP)}
        ping = server.send("ping", {})
        self.assertEqual(server.read()["id"], ping)  # both calls are running
        server.proc.send_signal(signal.SIGTERM)
        out, err = server.proc.communicate(timeout=30)
        answered = {}
        for line in out.splitlines():
            message = json.loads(line)
            answered[message["id"]] = message
        self.assertEqual(set(answered), calls, err)
        for message in answered.values():
            self.assertTrue(message["result"]["isError"], message)
        self.assertEqual(server.proc.returncode, 128 + signal.SIGTERM)
        self.assertEqual(wait_for_no_leftovers(marker, 5.0), [])


if __name__ == "__main__":
    unittest.main()
