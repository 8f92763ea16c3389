#!/usr/bin/python3
"""A front that dies leaves nothing behind on the host either.

`pysandbox mcp` without --output-dir keeps the files its calls make in a scratch directory of
its own under $TMPDIR. A server that exits removes it; one killed with SIGKILL cannot, so the
next server to start reaps every scratch directory whose server is gone (and only those). Judged
from the host: what is left in a private $TMPDIR after servers were killed mid-work and another
started and stopped.
"""
from __future__ import annotations

import json
import os
import subprocess
import unittest
from pathlib import Path

from harness import PYSANDBOX, SandboxTestCase, command_prefix, marked_profile, preload_marker
from harness import temp_dir, wait_for_no_leftovers

MAKE_FILE = "open('/tmp/work/left.txt', 'w').write('x' * 1000)\nprint('made')"


class Server:
    """An MCP server on stdio with $TMPDIR set to `tmpdir`, initialized."""

    def __init__(self, tmpdir: Path, marker: str):
        profile = marked_profile(marker)
        env = dict(os.environ, TMPDIR=str(tmpdir))
        self.proc = subprocess.Popen(command_prefix() + [PYSANDBOX, "mcp", "-p", str(profile)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)
        self.next_id = 0
        self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "test", "version": "1"}})
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def write(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def call(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.write({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the server closed its stdout (status {self.proc.wait()})")
        answer = json.loads(line)
        assert answer.get("id") == self.next_id, answer
        return answer

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def close(self) -> int:
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)


def scratch_dirs(tmpdir: Path) -> list[Path]:
    return sorted(p for p in tmpdir.iterdir() if p.name.startswith("pysandbox-mcp-"))


class McpScratchTest(SandboxTestCase):
    def setUp(self) -> None:
        self.tmpdir = temp_dir()
        self.tmpdir.chmod(0o1777)  # as /tmp: the unprivileged path's server writes here too
        self.marker = preload_marker()

    def tearDown(self) -> None:
        self.assertEqual(wait_for_no_leftovers(self.marker, 10), [])

    def test_killed_servers_scratch_is_reaped_by_the_next(self) -> None:
        # Not a scratch directory (no .owner): no server removes it.
        lookalike = self.tmpdir / "pysandbox-mcp-lookalike"
        lookalike.mkdir()
        (lookalike / "keep.txt").write_text("no .owner here")

        killed: list[Path] = []
        for _ in range(3):
            server = Server(self.tmpdir, self.marker)
            live = [d for d in scratch_dirs(self.tmpdir) if d != lookalike]
            # The server killed before this one started is gone; this one's own is there.
            self.assertEqual(len(live), 1, (killed, live))
            self.assertNotIn(live[0], killed)
            answer = server.call("tools/call",
                                 {"name": "run_python", "arguments": {"code": MAKE_FILE}})
            self.assertFalse(answer["result"].get("isError"), answer)
            self.assertTrue(any(live[0].rglob("left.txt")), "the call's file is not kept there")
            server.kill()
            self.assertTrue(live[0].exists())  # SIGKILL leaves it, with the call's file
            killed.append(live[0])

        server = Server(self.tmpdir, self.marker)
        self.assertFalse(any(d.exists() for d in killed), killed)
        self.assertEqual(server.close(), 0)
        self.assertEqual(scratch_dirs(self.tmpdir), [lookalike])
        self.assertTrue((lookalike / "keep.txt").exists())


if __name__ == "__main__":
    unittest.main()
