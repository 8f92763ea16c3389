#!/usr/bin/python3
"""ptrace or read the memory of a host process, and of the sandbox's own init.

The victim is a host sleep running as uid 65534 (the sandbox's host uid). The script tries
PTRACE_ATTACH / PTRACE_SEIZE on it and on the sandbox's init (pid 1, which talks to the
supervisor), process_vm_readv/process_vm_writev on both, and opening their /proc/PID/mem.
Judged from the host while the run is held: the victim and every process of the run have
TracerPid 0 and are not stopped; afterwards the victim is alive; and the seccomp filter denies
ptrace, process_vm_readv and process_vm_writev.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os
victim = int(ARGS[0])
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(4096)
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 4096)
for pid in (victim, 1):
    note("PTRACE_ATTACH %d" % pid, syscall(101, 16, pid, 0, 0))
    note("PTRACE_SEIZE %d" % pid, syscall(101, 0x4206, pid, 0, 0))
    try:
        lo = int(open("/proc/%d/maps" % pid).readline().split("-")[0], 16)
    except (OSError, ValueError):
        lo = 0x400000
    remote = iovec(lo, 16)
    note("process_vm_readv %d" % pid, syscall(310, pid, ctypes.byref(local), 1,
                                              ctypes.byref(remote), 1, 0))
    note("process_vm_writev %d" % pid, syscall(311, pid, ctypes.byref(local), 1,
                                               ctypes.byref(remote), 1, 0))
    attempt("open /proc/%d/mem" % pid, lambda: open("/proc/%d/mem" % pid, "rb").close())
note("done", 0)
hold()
'''


def test():
    judge = A.Judge("ptrace / process_vm_* on a host process and on the sandbox's init")
    victim = A.spawn_victim()
    time.sleep(0.05)
    with A.Sandbox(SCRIPT, [victim.pid]) as sb:
        if sb.wait_ready():
            for p in [A.Proc(victim.pid)] + sb.procs():
                tracer = p.status.get("TracerPid", "0")
                state = p.status.get("State", "")
                judge.check(tracer == "0", f"host pid {p.pid} ({p.exe}) is traced by {tracer}")
                judge.check(not state.startswith(("T", "t")),
                            f"host pid {p.pid} ({p.exe}) is stopped ({state})")
            A.check_filter_denies(judge, sb.filters(), [
                ("ptrace(PTRACE_ATTACH)", 101, A.AUDIT_ARCH_X86_64, (16, 1)),
                ("ptrace(PTRACE_SEIZE)", 101, A.AUDIT_ARCH_X86_64, (0x4206, 1)),
                ("process_vm_readv", 310, A.AUDIT_ARCH_X86_64, (1,)),
                ("process_vm_writev", 311, A.AUDIT_ARCH_X86_64, (1,))])
        else:
            judge.misbehaved("the script never reached the hold point")
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    judge.check(victim.poll() is None, "the host victim died")
    for what in ("PTRACE_ATTACH", "PTRACE_SEIZE", "process_vm_"):
        ok = o.succeeded(what)
        if ok:
            judge.escape("the script reports success for: " + ", ".join(ok))
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
