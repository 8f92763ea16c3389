#!/usr/bin/python3
"""Forge the "cpu_limit" verdict: die of SIGXCPU without using any CPU.

The result's status tells the caller why a run ended, and callers act on it (raise a limit,
retry, blame the code). "cpu_limit" means the CPU-time limit was reached; if it is read off the
signal alone, a script that sends itself SIGXCPU after next to no CPU gets its failure blamed
on the limit. The script does os.kill(os.getpid(), SIGXCPU) at once.

Contained when that run's --json status (through a kernel: its execute_reply's verdict) is
"killed" (any other signal), not "cpu_limit".
Control: a real busy loop under --cpu-time 1s --timeout 10s ends with status "cpu_limit".
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

FORGED = r'''
import os, signal
note("sending", 0)
sys.stdout.flush()
os.kill(os.getpid(), signal.SIGXCPU)
'''

BUSY = r'''
note("spinning", 0)
sys.stdout.flush()
x = 0
while True:
    x += 1
'''


def run(judge: A.Judge, body: str, options, expect: str, forged: bool) -> str:
    sb = A.Sandbox(body, options=[*A.RESULT_OPTIONS, *options], timeout="10s")
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(A.signalled(24), A.signalled(9)))
    r = A.check_verdict(judge, o)
    status = r.get("status")
    if r and status != expect:
        if forged:
            judge.escape(f"a script that sent itself SIGXCPU after "
                         f"{(r.get('usage') or {}).get('cpu_ms')} ms of CPU got status "
                         f"{status!r}, not {expect!r}")
        else:
            judge.misbehaved(f"control: a real busy loop under --cpu-time 1s got status "
                             f"{status!r}, not {expect!r}")
    return o.describe()


def test_gvisor(judge: A.Judge) -> str:
    """Under gVisor runsc reports a signal as exit code 128 + N, which a script can exit with
    too, so pysandbox gives no verdict from it (pysandbox(1)): the forged SIGXCPU must not read
    as cpu_limit. The real limit is the supervisor's, measured over runsc's processes: the busy
    loop ends long before the wall clock with status cpu_limit, after at least the limit's CPU
    time."""
    described = []
    for body, options, forged in ((FORGED, [], True), (BUSY, ["--cpu-time", "1s"], False)):
        sb = A.Sandbox(body, options=[*A.RESULT_OPTIONS, *options], timeout="10s")
        o = sb.run()
        r = A.check_verdict(judge, o) or {}
        cpu_ms = (r.get("usage") or {}).get("cpu_ms") or 0
        if forged and r.get("status") == "cpu_limit":
            judge.escape(f"a script that sent itself SIGXCPU after {cpu_ms} ms of CPU got "
                         "status 'cpu_limit'")
        if not forged and (r.get("status") != "cpu_limit" or cpu_ms < 1000 or o.host_timeout):
            judge.misbehaved(f"control: a real busy loop under --cpu-time 1s ended with status "
                             f"{r.get('status')!r}, exit code {r.get('exit_code')}, after "
                             f"{cpu_ms} ms of CPU")
        described.append(o.describe())
    return "\n=== control\n".join(described)


def test():
    judge = A.Judge("a cpu_limit verdict forged with SIGXCPU")
    if A.VIA == "gvisor":
        judge.done(test_gvisor(judge))
        return
    d1 = run(judge, FORGED, [], "killed", True)
    d2 = run(judge, BUSY, ["--cpu-time", "1s"], "cpu_limit", False)
    judge.done(d1 + "\n=== control\n" + d2)


if __name__ == "__main__":
    A.main(test)
