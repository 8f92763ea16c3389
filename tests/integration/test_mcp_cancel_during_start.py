#!/usr/bin/python3
"""A call cancelled while its session's sandbox is still starting does not run.

A session's sandbox is started anew after one is lost (its driver ended): the next call waits
for the new one's start, its [python] preload included. A notifications/cancelled for that call
meanwhile is the client's word that it must not run; Session::interrupt ignored it in that phase,
so the cell was sent once the sandbox was ready and ran in full, its effects visible to the next
call.

Judged from what the next call in the session sees: the cancelled cell's global.
"""
from __future__ import annotations

import json
import time
import unittest

from harness import SandboxTestCase, preload_marker, preload_module_profile
from test_mcp_session_ends import Server

SLOW_START = "import time\ntime.sleep(4)\n"


class McpCancelDuringStartTest(SandboxTestCase):
    def test_a_call_cancelled_while_its_sandbox_starts_does_not_run(self):
        marker = preload_marker()
        slow = str(preload_module_profile(marker, SLOW_START, extra='[limits]\nwall_time = "30s"'))
        server = Server("--pool", "0", "-p", slow, marker=preload_marker())
        self.addCleanup(server.close)
        started = server.answer(server.tool("start_session", profile=slow))
        session = started["result"]["structuredContent"]["session_id"]
        # The driver ends: the session's state is lost, the next call starts a new sandbox.
        server.answer(server.tool("run_python", session_id=session, code="import os\nos._exit(0)"))
        cancelled = server.tool("run_python", session_id=session,
                                code="ran = 'the cancelled cell ran'")
        time.sleep(0.5)  # well inside the new sandbox's 4 s start
        server.notify("notifications/cancelled", {"requestId": cancelled})
        probe = server.tool("run_python", session_id=session, code="print(globals().get('ran'))")
        while True:
            message = server.read()
            if message.get("id") == probe:
                break
        text = json.dumps(message)
        self.assertNotIn("the cancelled cell ran", text,
                         "a call cancelled while its sandbox was starting ran once it had started")


if __name__ == "__main__":
    unittest.main()
