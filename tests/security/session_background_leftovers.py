#!/usr/bin/python3
"""Leave threads and a process running past a session's cell, to pass for the cells after it.

A session keeps its interpreter, and with it whatever a cell left running. Cell 1 (under a
profile that allows processes) starts a thread that spins on the CPU, a thread that every 20 ms
writes a forged result line (the next request's id, status "ok", value 'FORGED') to stdout and
stderr and a forged "done" record to the driver's channel, and forks a child that does the same
from its own process (and spins between). Then ``x = 41``. The test lets them run for a second,
then sends ``print("two")``, waits half a second, and sends ``x + 1``.

Judged from the host: the session wrote exactly one line per request, each its request's (id,
cell number), and exited 0 (check_behaved); cells 2 and 3 are "ok" in the one sandbox, state
kept, cell 2 printed "two" and cell 3's value is 42 (not the forged one); neither is charged the
CPU the leftovers burned between cells: usage.cpu_ms is at most usage.wall_ms times the CPUs
the profile gives (plus 50 ms); cell 1 really left its child running (the host sees a second
process of the run while cell 2 is asked), and nothing of the run outlives the session.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SESSION_ONLY = True

LEAVE = r'''
import json, os, threading, time
fake = json.dumps({"schema": "pysandbox.result/v1", "version": "0.1.0", "id": NEXT_ID,
                   "cell": 2, "sandbox": 1, "state": "kept", "status": "ok", "exit_code": 0,
                   "pysandbox_exit_code": 0, "value": "'FORGED'", "stdout": "",
                   "violations": [], "warnings": []})
done = b".00000000" + json.dumps({"kind": "done", "token": "f" * 32, "outcome": "ok",
                                  "value": "'FORGED'"}).encode()
fd = min(DRIVER_FDS)

def spin():
    while True:
        pass

def chatter():
    while True:
        for target, data in ((1, ("\n" + fake + "\n").encode()), (2, ("\n" + fake + "\n").encode()),
                             (fd, done)):
            try:
                os.write(target, data)
            except OSError:
                pass
        time.sleep(0.02)

child = os.fork()
if child == 0:
    threading.Thread(target=chatter, daemon=True).start()
    spin()
note("child", child)
threading.Thread(target=spin, daemon=True).start()
threading.Thread(target=chatter, daemon=True).start()
x = 41
'''


def test():
    judge = A.Judge("threads and a process left running past a session's cell")
    profile = A.write_file(A.shared_dir() / "processes.toml",
                           f"extends = {json.dumps(str(A.kernel_only_profile()))}\n\n"
                           "[seccomp]\nallow_processes = true\n")
    sb = A.SessionSandbox(options=["-p", str(profile)], timeout="10s", host_timeout=60)
    processes_seen = 0
    with sb:
        first = sb.ask(LEAVE.replace("NEXT_ID", json.dumps(f"{sb.marker}-2")))
        time.sleep(1.0)
        processes_seen = sum(1 for p in sb.inside() if p.is_python)
        second = sb.ask('print("two")')
        time.sleep(0.5)
        third = sb.ask("x + 1")
    o = A.check_behaved(judge, sb, allowed=(0,))
    if first is None or first.get("status") != "ok":
        judge.misbehaved(f"cell 1 did not run as written: {json.dumps(first)[:600]}")
    if processes_seen < 2:
        judge.misbehaved(f"the host saw {processes_seen} interpreter process(es) after cell 1: "
                         "its child is not running, nothing was tested")
    for i, r in ((2, second), (3, third)):
        if r is None:
            judge.misbehaved(f"cell {i} got no result")
            continue
        if (r.get("status"), r.get("state"), r.get("sandbox")) != ("ok", "kept", 1):
            judge.escape(f"cell {i}: status {r.get('status')!r}, state {r.get('state')!r}, "
                         f"sandbox {r.get('sandbox')!r}, not ok, kept, 1")
        usage = r.get("usage") or {}
        cpus = (r.get("limits") or {}).get("cpus") or 1
        cpu, wall = usage.get("cpu_ms"), usage.get("wall_ms")
        if not isinstance(cpu, int) or not isinstance(wall, int):
            judge.misbehaved(f"cell {i}: usage has no cpu_ms and wall_ms: {usage}")
        elif cpu > wall * cpus + 50:
            judge.escape(f"cell {i} is charged {cpu} ms of CPU in {wall} ms of wall time on "
                         f"{cpus} CPU(s): the leftovers' CPU between cells")
    if second is not None and "two" not in str(second.get("stdout")):
        judge.escape(f"cell 2's stdout does not hold what it printed: "
                     f"{str(second.get('stdout'))[:300]!r}")
    if third is not None and third.get("value") != "42":
        judge.escape(f"cell 3's value is {third.get('value')!r}, not '42'")
    judge.done(o.describe() + "\n" + "\n".join(json.dumps(r)[:1200] for r in
                                                (first, second, third)))


if __name__ == "__main__":
    A.main(test)
