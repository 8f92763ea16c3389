#!/usr/bin/python3
"""Leave a daemon behind: double fork + setsid, posix_spawn, subprocess, raw clone().

The script tries every way Python has to start a process that detaches and sleeps for 30 s
(os.fork twice with setsid, os.posix_spawn, subprocess.Popen with start_new_session, a raw
clone(SIGCHLD) syscall), then exits. Judged from the host: after the run, no process carrying
the run's marker or living in the run's PID or user namespace is left (the host records those
namespaces while the run is held). The default profile also forbids child processes, so any
process the run had besides init and the script counts as well.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os, subprocess, time
def daemonize():
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(30)
        os._exit(0)
    os.waitpid(pid, 0)
    return pid
attempt("double fork", daemonize)
attempt("posix_spawn", os.posix_spawn, sys.executable,
        [sys.executable, "-c", "import time; time.sleep(30)", MARKER], {})
attempt("subprocess", lambda: subprocess.Popen(["/bin/sleep", "30"], start_new_session=True,
                                               stdin=subprocess.DEVNULL).pid)
r = syscall(56, 17, 0, 0, 0, 0)                     # clone(SIGCHLD)
if r == 0:
    os.setsid()
    time.sleep(30)
    os._exit(0)
note("raw clone(SIGCHLD)", r)
time.sleep(0.2)
note("done", 0)
hold()
'''


def test():
    judge = A.Judge("processes left behind (double-forked daemons, spawn, clone)")
    with A.Sandbox(SCRIPT) as sb:
        if sb.wait_ready():
            sb.sampler.sample()
            inside = sb.inside()
            extra = [p for p in inside if p.inner_pid not in (1, 2)]
            # Processes without the marker (posix_spawn'd sleep) are found by namespace.
            pidns = {p.ns["pid"] for p in inside}
            known = {p.pid for p in inside}
            for pid in A.all_pids():
                if A.readlink(f"/proc/{pid}/ns/pid") in pidns and pid not in known:
                    extra.append(A.Proc(pid))
            if A.VIA == "gvisor":
                # runsc's processes (its sandbox, gofer and the stubs that run the script's
                # address spaces) are below init, and gVisor's process limit answers the
                # script's forks: what the host judges is that only runsc runs there (and,
                # after the run, that nothing of it is left).
                for problem in sb.gvisor_problems():
                    judge.escape(problem)
                extra = [p for p in extra if os.path.basename(p.exe) != "runsc"]
            if extra:
                judge.escape(f"the default profile forbids child processes, yet the run had "
                             f"{len(extra)}: " + ", ".join(f"{os.path.basename(p.exe)} "
                                                            f"(inner pid {p.inner_pid})"
                                                            for p in extra[:4]))
        else:
            judge.misbehaved("the script never reached the hold point")
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"], grace=1.0)
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
