#!/usr/bin/python3
"""Memory bomb through SysV shared memory: segments outlive their attachment, so attaching one,
filling it and detaching it again keeps the address space small while the memory stays used.

Run with --memory 128MiB. The script creates 5 segments of 60 MiB (300 MiB), fills each while
attached and detaches it, then holds. Judged from the host while the run is held, through
/proc/sysvipc/shm read by a host helper that joined the sandbox's IPC namespace (it lists the
segments with their resident size): the segments' resident memory stays within the memory
limit plus slack. Only a memory cgroup, or small shmmax/shmall in the sandbox's IPC namespace,
bounds it; without them the seccomp filter refusing shmget is the containment, and pysandbox's
report of that refusal (stderr) must be there. A bomb that neither filled half the limit nor was
refused tested nothing, and fails (attack.check_bomb_went_off).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

LIMIT_MIB = 128
SLACK_MIB = 16

SCRIPT = r'''
libc.shmget.restype = ctypes.c_int
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
size = 60 << 20
total = 0
for i in range(5):
    shmid = libc.shmget(0, size, 0o1000 | 0o600)       # IPC_PRIVATE, IPC_CREAT
    if shmid < 0:
        note("shmget %d" % i, -ctypes.get_errno())
        break
    addr = libc.shmat(shmid, None, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        note("shmat %d" % i, -ctypes.get_errno())
        break
    ctypes.memset(addr, 1, size)
    libc.shmdt(addr)
    total += size
note("sysv shm", "ok: %d MiB" % (total >> 20))
note("done", 0)
hold()
'''


def sysvipc_shm_of(pid: int) -> str:
    """/proc/sysvipc/shm as seen from the IPC namespace of ``pid`` (the file always shows the
    reader's namespace, so a host helper joins the sandbox's with setns first)."""
    import ctypes
    import subprocess
    fd = os.open(f"/proc/{pid}/ns/ipc", os.O_RDONLY)
    libc = ctypes.CDLL(None, use_errno=True)

    def join():
        if libc.setns(fd, 0x08000000) != 0:  # CLONE_NEWIPC
            os._exit(99)
    try:
        r = subprocess.run(["/bin/cat", "/proc/sysvipc/shm"], preexec_fn=join, pass_fds=(fd,),
                           capture_output=True, timeout=10)
    finally:
        os.close(fd)
    if r.returncode != 0:
        raise A.Verdict(f"cannot read the sandbox's /proc/sysvipc/shm (exit {r.returncode})")
    return r.stdout.decode()


def test():
    judge = A.Judge(f"SysV shm memory bomb under --memory {LIMIT_MIB}MiB")
    rss_mib = 0
    lines = []
    with A.Sandbox(SCRIPT, options=["--memory", f"{LIMIT_MIB}MiB"], timeout="8s") as sb:
        if not sb.wait_ready():
            judge.misbehaved("the script never reached the hold point")
        elif A.VIA == "gvisor":
            # The script's segments are gVisor's, in its memory file: runsc's on the host.
            rss_mib = sb.gvisor_memory_kib() >> 10
            lines = ["(gVisor's memory file)"]
        else:
            lines = sysvipc_shm_of(sb.python().pid).splitlines()
            header = lines[0].split()
            col = header.index("rss") if "rss" in header else header.index("size")
            rss_mib = sum(int(l.split()[col]) for l in lines[1:]) >> 20
    o = A.check_behaved(judge, sb, allowed=(0, 1, A.signalled(9)), expect_notes=["done"])
    A.check_bomb_went_off(judge, o, bool(lines), rss_mib, LIMIT_MIB, "shmget", "shmget 0")
    judge.check(rss_mib <= LIMIT_MIB + SLACK_MIB,
                f"the run's SysV segments hold {rss_mib} MiB under --memory {LIMIT_MIB}MiB")
    judge.done(o.describe() + f"\nSysV shm resident: {rss_mib} MiB")


if __name__ == "__main__":
    A.main(test)
