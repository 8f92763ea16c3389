#!/usr/bin/python3
"""Forge the "memory_limit" verdict: raise MemoryError without being short of memory.

"memory_limit" tells the caller the run needed more memory than it was given. If it is read off
the exception's type alone, a script that raises MemoryError() itself, after allocating 10 MiB
of a 256 MiB limit, gets its failure blamed on the limit (and a caller that retries with more
memory, or reports the limit, is misled).

Contained when that run's --json status (through a kernel: its execute_reply's verdict) is
"exception", not "memory_limit". Control: a real
exhaustion (a list of 1 MiB bytes objects grown without end under --memory 128MiB) ends with
status "memory_limit".
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

FORGED = r'''
ballast = bytearray(10 << 20)
note("raising", 0)
raise MemoryError()
'''

REAL = r'''
note("allocating", 0)
blocks = []
while True:
    blocks.append(b"\x01" * (1 << 20))
'''


def run(judge: A.Judge, body: str, options, expect: str, forged: bool) -> str:
    sb = A.Sandbox(body, options=[*A.RESULT_OPTIONS, *options], timeout="20s")
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(1, A.signalled(9)))
    r = A.check_verdict(judge, o)
    status = r.get("status")
    if r and status != expect:
        if forged:
            judge.escape(f"a script that raised MemoryError itself with "
                         f"{(r.get('usage') or {}).get('max_rss_kib')} KiB resident got status "
                         f"{status!r}, not {expect!r}")
        else:
            judge.misbehaved(f"control: real memory exhaustion under --memory 128MiB got "
                             f"status {status!r}, not {expect!r}")
    return o.describe()


def test():
    judge = A.Judge("a memory_limit verdict forged with raise MemoryError()")
    d1 = run(judge, FORGED, [], "exception", True)
    d2 = run(judge, REAL, ["--memory", "128MiB"], "memory_limit", False)
    judge.done(d1 + "\n=== control\n" + d2)


if __name__ == "__main__":
    A.main(test)
