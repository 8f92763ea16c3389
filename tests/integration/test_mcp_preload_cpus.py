#!/usr/bin/python3
"""limits.cpus holds for the whole of an MCP call's sandbox, whatever ran in it before its
first cell: a profile's preload (or a package environment's module imported as one) may start
a process while the sandbox waits in the pool. Judged from the host: every task under the
sandbox's init, each one's Cpus_allowed_list, together no more CPUs than limits.cpus.

The server and the warm sandbox are put on two different CPUs from the host before the call
(as test_mcp_cpus does), so that a sandbox moved towards the server's CPU before its first cell
would leave the preload's process behind on the other one, and the sandbox would then run on
two.
"""
from __future__ import annotations

import os
import unittest

from harness import SandboxTestCase, new_marker, preload_module_profile, settle
from test_mcp_session_ends import Server

# The preload's process: born in the warm sandbox, before any cell; it sleeps (its CPUs are
# what is judged, not what it burns).
PRELOAD = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\n    os._exit(0)\n"
THREAD = ("import threading, time\n"
          "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
          "time.sleep(60)")


def children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as listed:
            found += [int(child) for child in listed.read().split()]
    return found


def tree(pid: int) -> list[int]:
    return [pid] + [below for child in children(pid) for below in tree(child)]


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


class McpPreloadCpusTest(SandboxTestCase):
    def test_a_process_a_preload_started_leaves_the_sandbox_its_cpus(self):
        allowed = sorted(os.sched_getaffinity(0))
        self.assertGreaterEqual(len(allowed), 2, "this test puts the server and a sandbox on "
                                "two different CPUs: it needs two")
        there, here = allowed[:2]
        module = new_marker().replace("-", "_")
        marked = preload_module_profile(module, PRELOAD, """
            [limits]
            wall_time = "60s"
            cpus = 1
            [seccomp]
            allow_processes = true
            [policy]
            deny_calls = []
            """)
        # Server's own profile first (its marker a module that does not exist), then this one.
        server = Server("--pool", "1", "-p", str(marked), marker=new_marker().replace("-", "_"))
        self.addCleanup(server.close)

        def warm():  # init, its interpreter and the preload's process
            for init in children(server.proc.pid):
                if len(found := tree(init)) >= 3:
                    return found
            return None
        settle(lambda: not warm(), 20)
        sandbox = warm()
        self.assertTrue(sandbox, "the pool started no sandbox with its preload's process")
        for pid in sandbox:
            for tid in tasks(pid):
                os.sched_setaffinity(tid, {there})
        for tid in tasks(server.proc.pid):
            os.sched_setaffinity(tid, {here})
        call = server.tool("run_python", code=THREAD, profile=str(marked))
        try:
            interpreter = sandbox[1]
            settle(lambda: len(tasks(interpreter)) < 2, 10)
            self.assertGreaterEqual(len(tasks(interpreter)), 2, "the cell's thread did not start")
            cpus = {pid: set().union(*(cpus_of(pid, tid) for tid in tasks(pid)))
                    for pid in sandbox}
            self.assertLessEqual(len(set().union(*cpus.values())), 1,
                                 f"limits.cpus = 1, but the sandbox's processes may run on "
                                 f"{cpus}")
        finally:
            server.notify("notifications/cancelled", {"requestId": call})


if __name__ == "__main__":
    unittest.main()
