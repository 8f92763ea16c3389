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


def test():
    judge = A.Judge("a cpu_limit verdict forged with SIGXCPU")
    d1 = run(judge, FORGED, [], "killed", True)
    d2 = run(judge, BUSY, ["--cpu-time", "1s"], "cpu_limit", False)
    judge.done(d1 + "\n=== control\n" + d2)


if __name__ == "__main__":
    A.main(test)
