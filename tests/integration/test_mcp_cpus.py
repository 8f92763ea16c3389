#!/usr/bin/python3
"""Where an MCP call's sandbox runs. A warm sandbox moves to the CPU the server runs on before
its first cell, so that the hand-off between them stays on one CPU; it keeps limits.cpus there
(one CPU in the default profile) for its init, its interpreter and the threads the cell starts.
Once the script has run, nothing of the sandbox moves: a thread it started while the others
moved could keep the old CPU.

The server and the warm sandbox are put on two different CPUs from the host before the call,
and every task of the sandbox is judged from the host (/proc/PID/task/TID/status).
"""
from __future__ import annotations

import os
import unittest

from harness import SandboxTestCase, preload_marker, settle
from test_mcp_session_ends import Server

THREAD = ("import threading, time\n"
          "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()")


def children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as listed:
            found += [int(child) for child in listed.read().split()]
    return found


def tasks(pid: int) -> list[int]:
    return [int(task) for task in os.listdir(f"/proc/{pid}/task")]


def cpus_of(pid: int, tid: int) -> set[int]:
    with open(f"/proc/{pid}/task/{tid}/status") as status:
        for line in status:
            if line.startswith("Cpus_allowed_list:"):
                cpus = set()
                for part in line.split(":", 1)[1].strip().split(","):
                    first, _, last = part.partition("-")
                    cpus.update(range(int(first), int(last or first) + 1))
                return cpus
    raise AssertionError(f"/proc/{pid}/task/{tid}/status has no Cpus_allowed_list")


def pin(pid: int, cpu: int) -> None:
    for tid in tasks(pid):
        os.sched_setaffinity(tid, {cpu})


class McpCpuTest(SandboxTestCase):
    def setUp(self):
        super().setUp()
        allowed = sorted(os.sched_getaffinity(0))
        self.assertGreaterEqual(len(allowed), 2, "this test puts the server and a sandbox on "
                                "two different CPUs: it needs two")
        self.there, self.here = allowed[:2]
        self.server = Server("--pool", "1", marker=preload_marker())
        self.addCleanup(self.server.close)

    def warm_sandbox(self) -> tuple[int, int]:
        """The pool's sandbox, its init and interpreter, once it has both."""
        def found():
            for init in children(self.server.proc.pid):
                if interpreters := children(init):
                    return init, interpreters[0]
            return None
        settle(lambda: not found(), 20)
        sandbox = found()
        self.assertTrue(sandbox, "the pool started no sandbox")
        return sandbox

    def assert_on(self, sandbox: tuple[int, int], cpu: int, threads: int) -> None:
        init, interpreter = sandbox
        settle(lambda: len(tasks(interpreter)) < threads, 10)
        self.assertEqual(len(tasks(interpreter)), threads, "the cell's thread did not start")
        for pid in sandbox:
            for tid in tasks(pid):
                self.assertEqual(cpus_of(pid, tid), {cpu}, f"task {tid} of {pid}")

    def test_a_call_moves_its_warm_sandbox_beside_the_server(self):
        sandbox = self.warm_sandbox()
        for pid in sandbox:
            pin(pid, self.there)
        pin(self.server.proc.pid, self.here)
        call = self.server.tool("run_python", code=THREAD + "\ntime.sleep(60)")
        try:
            self.assert_on(sandbox, self.here, threads=2)
        finally:
            self.server.notify("notifications/cancelled", {"requestId": call})

    def test_a_sandbox_that_ran_the_script_stays_where_it_is(self):
        sandbox = self.warm_sandbox()
        session = self.server.start_session()
        for pid in sandbox:
            pin(pid, self.there)
        pin(self.server.proc.pid, self.here)
        first = self.server.answer(self.server.tool("run_python", code=THREAD,
                                                    session_id=session))
        self.assertEqual(first["result"]["structuredContent"]["status"], "ok", first)
        self.assert_on(sandbox, self.here, threads=2)
        pin(self.server.proc.pid, self.there)
        second = self.server.answer(self.server.tool("run_python", code="1",
                                                     session_id=session))
        self.assertEqual(second["result"]["structuredContent"]["status"], "ok", second)
        self.assert_on(sandbox, self.here, threads=2)


if __name__ == "__main__":
    unittest.main()
