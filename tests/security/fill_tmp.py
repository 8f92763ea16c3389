#!/usr/bin/python3
"""Fill /tmp: write past --tmp-size, and exhaust its inodes.

Run with --tmp-size 16MiB. The script writes one big file until it fails, more files in other
directories of /tmp, then creates empty files until that fails too, then holds. Judged from
the host while held, through /proc/PID/root/tmp of the sandboxed process: the tmpfs is no
bigger than the limit, holds no more than it and has at most its 65536 inodes in use; none of
the script's files (named after the run's marker) appeared on the host; and the script got an
error (ENOSPC/EFBIG) rather than hanging.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

LIMIT_MIB = 16
INODES = 65536 + 16  # pysandbox mounts /tmp with nr_inodes=65536

SCRIPT = r'''
import os
chunk = b"\x01" * (1 << 20)
def fill(path, mib):
    n = 0
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(chunk)
            f.flush()
            n += 1
    return n
attempt("write big file", fill, "/tmp/work/big-%s.bin" % MARKER, 64)
attempt("write /tmp/other", fill, "/tmp/other-%s.bin" % MARKER, 64)
os.makedirs("/tmp/many-" + MARKER, exist_ok=True)
def inodes():
    for i in range(200000):
        open("/tmp/many-%s/%d" % (MARKER, i), "wb").close()
if "no-inodes" not in ARGS:
    attempt("exhaust inodes", inodes)
note("done", 0)
hold()
'''


def test():
    judge = A.Judge(f"fill /tmp under --tmp-size {LIMIT_MIB}MiB")
    # Through gVisor the script does not exhaust the inodes: its file proxy makes a few hundred
    # files a second, and the 65,536 would take minutes. The host still checks the same tmpfs,
    # bound in from the sandbox, for its size and its inodes in use.
    args = ["no-inodes"] if A.VIA == "gvisor" else []
    with A.Sandbox(SCRIPT, args, options=["--tmp-size", f"{LIMIT_MIB}MiB"], timeout="9s",
                   host_timeout=15) as sb:
        if sb.wait_ready(timeout=12):
            py = sb.python()
            vfs = os.statvfs(f"/proc/{py.pid}/root/tmp")
            size_mib = vfs.f_blocks * vfs.f_frsize / (1 << 20)
            used_mib = (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize / (1 << 20)
            judge.check(size_mib <= LIMIT_MIB + 0.5,
                        f"the sandbox's /tmp is {size_mib:.1f} MiB under --tmp-size {LIMIT_MIB}MiB")
            judge.check(used_mib <= LIMIT_MIB + 0.5, f"{used_mib:.1f} MiB written into /tmp")
            judge.check(vfs.f_files - vfs.f_ffree <= INODES,
                        f"{vfs.f_files - vfs.f_ffree} inodes in use in the sandbox's /tmp")
        else:
            judge.misbehaved("the script never reached the hold point")
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    for what in ("write big file", "write /tmp/other", "exhaust inodes"):
        if str(o.note(what)).startswith("ok"):
            judge.escape(f"{what} succeeded in full")
    # Everything the script wrote carries the run's marker in its name: none of it may be on
    # the host (a free-space comparison would be at the mercy of other work on the machine).
    for top in ("/tmp", "/var/tmp", "/dev/shm"):
        for root, dirs, files in os.walk(top):
            if root.count("/") > 4:
                dirs[:] = []
            for name in dirs + files:
                if sb.marker in name:
                    judge.escape(f"{os.path.join(root, name)} appeared on the host")
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
