#!/usr/bin/python3
"""The i386 syscall ABI via `int 0x80` from a 64-bit process.

Syscall numbers differ between ABIs (i386 2 is fork, x86_64 2 is open), so a filter that does
not check the architecture can be walked around. The script maps an anonymous RWX page and
puts this function in it (x86_64 machine code):

    53          push rbx
    48 89 f8    mov  rax, rdi        ; i386 syscall number
    48 89 f3    mov  rbx, rsi        ; arg1
    48 87 ca    xchg rdx, rcx        ; edx = arg3, ecx = arg2
    cd 80       int  0x80
    5b          pop  rbx
    c3          ret

then calls i386 getpid (20), fork (2) (a child would sleep) and unshare(CLONE_NEWUSER) (310).
If the kernel refuses PROT_EXEC memory that is no barrier by itself (any JIT, or code that
finds `cd 80` in a mapped library, gets there), so the verdict also rests on the seccomp filter
the kernel holds for the script, read and evaluated by the host for i386: every i386 call
must be denied. Contained when the filter denies the i386 ABI, no i386 call succeeded (the
process is killed with SIGSYS or gets an error), no child appeared and no namespace changed.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import mmap, os, time
hold("before")
CODE = bytes.fromhex("53" "4889f8" "4889f3" "4887ca" "cd80" "5b" "c3")
page = None
for how in ("mmap RWX", "mmap RW then mprotect RX"):
    try:
        if how == "mmap RWX":
            m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
            m.write(CODE)
            addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
        else:
            m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            m.write(CODE)
            addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
            if libc.mprotect(ctypes.c_void_p(addr), 4096, 5) != 0:
                raise OSError(ctypes.get_errno(), "mprotect")
        page = (m, addr)
        note(how, "ok: %#x" % addr)
        break
    except OSError as e:
        note(how, -e.errno if e.errno else repr(e))
if page:
    int80 = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_long, ctypes.c_long, ctypes.c_long,
                             ctypes.c_long)(page[1])
    note("calling i386 getpid", 0)
    note("i386 getpid", int80(20, 0, 0, 0))
    r = int80(2, 0, 0, 0)
    if r == 0:
        time.sleep(20)
        os._exit(0)
    note("i386 fork", r)
    note("i386 unshare(CLONE_NEWUSER)", int80(310, 0x10000000, 0, 0))
time.sleep(0.2)
note("done", 0)
hold()
'''

I386 = [("getpid", 20), ("fork", 2), ("vfork", 190), ("clone", 120), ("unshare", 310),
        ("mount", 21), ("ptrace", 26), ("socketcall", 102), ("socket", 359), ("keyctl", 288),
        ("bpf", 357), ("perf_event_open", 336), ("userfaultfd", 374), ("open", 5),
        ("write", 4)]


PROBE = r'''
import ctypes, mmap
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(bytes.fromhex("534889f84889f34887cacd805bc3"))
f = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_long, ctypes.c_long, ctypes.c_long,
                     ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
print(f(20, 0, 0, 0))
'''


def host_has_int80() -> bool:
    """Some kernels (ia32_emulation=0, some paravirtualised guests) fault on int 0x80."""
    import subprocess
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, timeout=10)
    return r.returncode == 0


def test():
    judge = A.Judge("i386 syscalls via int 0x80")
    int80 = host_has_int80()
    with A.Sandbox(SCRIPT) as sb:
        if not sb.wait_ready("before"):
            judge.misbehaved("the script never started")
        else:
            A.check_filter_denies(judge, sb.filters(), [
                (f"i386 {name}", nr, A.AUDIT_ARCH_I386, ()) for name, nr in I386])
            sb.go()
            if sb.wait_ready("end"):
                extra = [p for p in sb.inside() if p.inner_pid not in (1, 2)]
                if extra:
                    judge.escape(f"i386 fork created {len(extra)} process(es)")
                A.check_same_namespaces(judge, sb)
    # SIGSEGV is the kernel's own answer when it has no int 0x80 entry at all: acceptable only
    # if the host faults the same way and the script died right at its first i386 call.
    allowed = (0, A.signalled(31)) if int80 else (0, A.signalled(31), A.signalled(11))
    o = A.check_behaved(judge, sb, allowed=allowed)
    if o.rc == A.signalled(11):
        notes = o.notes()
        if not notes or notes[-1]["what"] != "calling i386 getpid":
            judge.misbehaved("the script crashed (SIGSEGV) somewhere else than at int 0x80")
    if o.rc == 0 and o.note("done") is None:
        judge.misbehaved("the script exited 0 without finishing")
    if o.rc == 0 and o.note("mmap RWX") is None and o.note("mmap RW then mprotect RX") is None:
        judge.misbehaved("the script never tried to map code")
    ok = o.succeeded("i386")
    if ok:
        judge.escape("i386 calls went through: " + ", ".join(ok))
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
