#!/usr/bin/python3
"""Signal a host process that runs as the sandbox's own host uid.

The victim (a sleep running as uid 65534, so permissions alone would let the script signal
it) is outside the sandbox's PID namespace. The script sends SIGSTOP/SIGKILL to its host pid,
to pids around it, to its process group, through pidfd_open/pidfd_send_signal, then
kill(-1, SIGKILL). Contained when the victim is alive and not stopped, and the run behaved.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os, signal
victim = int(ARGS[0])
me = os.getpid()
for sig in (signal.SIGSTOP, signal.SIGKILL):
    attempt("kill(victim, %d)" % sig, os.kill, victim, sig)
    attempt("kill(-victim, %d)" % sig, os.kill, -victim, sig)
    for pid in range(max(2, victim - 20), victim + 20):
        if pid != me:
            try:
                os.kill(pid, sig)
                note("kill(%d, %d)" % (pid, sig), "ok: sent")
            except OSError:
                pass
pfd = syscall(434, victim, 0)                       # pidfd_open
note("pidfd_open(victim)", pfd)
if pfd >= 0:
    note("pidfd_send_signal(victim)", syscall(424, pfd, signal.SIGKILL, 0, 0))
# Under gVisor the script is its container's PID 1 (runsc starts it as init): kill(1) is then
# a signal to itself, which gVisor delivers.
if me != 1:
    note("kill(1, SIGKILL)", syscall(62, 1, signal.SIGKILL))
note("kill(-1, SIGKILL)", syscall(62, -1, signal.SIGKILL))
note("done", 0)
'''


def test():
    judge = A.Judge("signals to a host process of the same host uid")
    victim = A.spawn_victim()
    time.sleep(0.05)
    sb = A.Sandbox(SCRIPT, [victim.pid])
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    time.sleep(0.1)
    if victim.poll() is not None:
        judge.escape(f"the host victim died ({victim.returncode})")
    else:
        state = A.status(victim.pid).get("State", "")
        judge.check(not state.startswith(("T", "t")), f"the host victim is stopped ({state})")
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
