#!/usr/bin/python3
"""The x32 syscall ABI: x86_64 numbers with bit 30 set (__X32_SYSCALL_BIT).

A filter that compares numbers without excluding the x32 bit lets `0x40000000 | nr` through,
and on a kernel built with CONFIG_X86_X32_ABI that runs the syscall. libc's syscall() passes
the number through unchanged, so the script simply calls syscall(0x40000000 | nr) for getpid,
fork (a child would sleep), unshare(CLONE_NEWUSER), mount and socket(AF_INET). The kernel
under test may lack x32 (then every call is ENOSYS regardless), so the verdict also rests on
the seccomp filter the kernel holds for the script, read and evaluated by the host: every x32
number must be denied. Contained when the filter denies them, no x32 call succeeded, no child
appeared and no namespace changed.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

X32 = 0x40000000

SCRIPT = r'''
import os, time
X32 = 0x40000000
hold("before")
note("x32 getpid", syscall(X32 | 39))
r = syscall(X32 | 57)
if r == 0:
    time.sleep(20)
    os._exit(0)
note("x32 fork", r)
note("x32 unshare(CLONE_NEWUSER)", syscall(X32 | 272, 0x10000000))
note("x32 mount", syscall(X32 | 165, b"none", b"/tmp", b"tmpfs", 0, None))
note("x32 socket(AF_INET)", syscall(X32 | 41, 2, 1, 0))
time.sleep(0.2)
note("done", 0)
hold()
'''

CASES = [("getpid", 39), ("fork", 57), ("clone", 56), ("unshare", 272), ("mount", 165),
         ("socket", 41), ("ptrace (x32 521)", 521), ("keyctl", 250), ("bpf", 321),
         ("ioctl (x32 514)", 514), ("open", 2), ("write", 1)]


def test():
    judge = A.Judge("x32 syscalls (nr | 0x40000000)")
    with A.Sandbox(SCRIPT) as sb:
        if not sb.wait_ready("before"):
            judge.misbehaved("the script never started")
        else:
            # Read before the attempt: a filter that kills on x32 leaves nothing to inspect.
            A.check_filter_denies(judge, sb.filters(), [
                (f"x32 {name}", X32 | nr, A.AUDIT_ARCH_X86_64, ()) for name, nr in CASES])
            sb.go()
            if sb.wait_ready("end"):
                extra = [p for p in sb.inside() if p.inner_pid not in (1, 2)]
                if extra:
                    judge.escape(f"x32 fork created {len(extra)} process(es)")
                A.check_same_namespaces(judge, sb)
    # Killed by SIGSYS at the first x32 call is the policy's answer; an error return is fine.
    o = A.check_behaved(judge, sb, allowed=(0, A.signalled(31)))
    if o.rc == 0 and o.note("done") is None:
        judge.misbehaved("the script exited 0 without finishing")
    ok = o.succeeded("x32")
    if ok:
        judge.escape("x32 calls went through: " + ", ".join(ok))
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
