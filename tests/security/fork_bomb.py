#!/usr/bin/python3
"""Fork bomb: every process forks until the kernel says no, then they all linger.

Run with --max-procs 16. Judged from the host: sampling the run's processes every 20 ms, the
count inside the sandbox never exceeds the limit (plus init), the run ends on its own (the
script's exit or the wall-clock limit), and nothing is left afterwards. With the default
profile's no-child-processes rule the first fork simply fails.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

LIMIT = 16

SCRIPT = r'''
import os, time
original = os.getpid()
forks = 0
try:
    while forks < 100000:
        pid = os.fork()
        forks += 1
        if pid == 0:
            forks = 0
            continue
except OSError as e:
    if os.getpid() == original:
        note("fork", -e.errno)
    time.sleep(1)
    if os.getpid() != original:
        os._exit(0)
note("done", 0)
'''


def test():
    judge = A.Judge(f"fork bomb under --max-procs {LIMIT}")
    sb = A.Sandbox(SCRIPT, options=["--max-procs", str(LIMIT)], timeout="4s")
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0, A.TIMEOUT), grace=1.0)
    peak = sb.sampler.peak_procs
    tasks = sb.sampler.peak_tasks
    judge.check(tasks <= LIMIT + 2, f"{peak} processes / {tasks} tasks at once under "
                f"--max-procs {LIMIT}")
    judge.done(o.describe() + f"\npeak processes {peak}, tasks {tasks}")


if __name__ == "__main__":
    A.main(test)
