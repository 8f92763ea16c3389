#!/usr/bin/python3
"""The mount API: mount, remount read-write, bind, new mount API (fsopen/fsmount/open_tree/
move_mount/fspick/mount_setattr), propagation changes.

Judged from the host: the sandboxed process's mount table (/proc/PID/mountinfo: ids, mount
points, per-mount and superblock options) is identical before and after the attempts; / and
/usr are still read-only; no process of the run holds an fs-context fd; the host's own mount
table is unchanged; and the seccomp filter denies the whole mount API.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os, struct
hold("before")
os.makedirs("/tmp/work/m", exist_ok=True)
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_SHARED = 1, 32, 4096, 16384, 1 << 20
def mount(src, tgt, fs, flags, data=None):
    return syscall(165, src, tgt, fs, flags, data)
note("mount tmpfs", mount(b"none", b"/tmp/work/m", b"tmpfs", 0))
note("mount proc", mount(b"proc", b"/tmp/work/m", b"proc", 0))
note("remount / rw", mount(None, b"/", None, MS_REMOUNT | MS_BIND))
note("remount /usr rw", mount(None, b"/usr", None, MS_REMOUNT | MS_BIND))
note("remount /proc/sys rw", mount(None, b"/proc/sys", None, MS_REMOUNT | MS_BIND))
note("bind / to /tmp/work/m", mount(b"/", b"/tmp/work/m", None, MS_BIND | MS_REC))
note("make / shared", mount(None, b"/", None, MS_SHARED | MS_REC))
AT_FDCWD, OPEN_TREE_CLONE, AT_RECURSIVE, AT_EMPTY_PATH = -100, 1, 0x8000, 0x1000
MOVE_MOUNT_F_EMPTY_PATH = 4
t = syscall(428, AT_FDCWD, b"/usr", OPEN_TREE_CLONE | AT_RECURSIVE)
note("open_tree clone /usr", t)
if t >= 0:
    note("move_mount tree", syscall(429, t, b"", AT_FDCWD, b"/tmp/work/m", MOVE_MOUNT_F_EMPTY_PATH))
fs = syscall(430, b"tmpfs", 0)
note("fsopen tmpfs", fs)
if fs >= 0:
    note("fsconfig create", syscall(431, fs, 6, None, None, 0))
    m = syscall(432, fs, 0, 0)
    note("fsmount", m)
    if m >= 0:
        note("move_mount fsmount", syscall(429, m, b"", AT_FDCWD, b"/tmp/work/m",
                                           MOVE_MOUNT_F_EMPTY_PATH))
p = syscall(433, AT_FDCWD, b"/", 0)
note("fspick /", p)
if p >= 0:
    note("fsconfig rw", syscall(431, p, 0, b"rw", None, 0))   # FSCONFIG_SET_FLAG
    note("fsconfig reconfigure", syscall(431, p, 7, None, None, 0))
attr = ctypes.create_string_buffer(struct.pack("=QQQQ", 0, 1, 0, 0))  # attr_clr = RDONLY
note("mount_setattr / clear RDONLY", syscall(442, AT_FDCWD, b"/", 0, attr, 32))
note("mount_setattr /usr clear RDONLY", syscall(442, AT_FDCWD, b"/usr", AT_RECURSIVE, attr, 32))
note("done", 0)
hold()
'''


def test():
    judge = A.Judge("mount API: mount/remount/bind, fsopen/fsmount/open_tree/mount_setattr")
    host_before = A.mount_table(os.getpid())
    with A.Sandbox(SCRIPT) as sb:
        if not sb.wait_ready("before"):
            judge.misbehaved("the script never started")
        else:
            py = sb.python()
            before = A.mount_table(py.pid)
            sb.go()
            if sb.wait_ready("end"):
                after = A.mount_table(py.pid)
                A.check_same_mounts(judge, before, after)
                for row in after:
                    if row[1] in ("/", "/usr") and "ro" not in row[2].split(","):
                        judge.escape(f"{row[1]} is mounted read-write: {row}")
                A.check_held_fds(judge, sb, {"fs context": r"fscontext"})
                A.check_filter_denies(judge, sb.filters(), [
                    (name, nr, A.AUDIT_ARCH_X86_64, ()) for name, nr in (
                        ("mount", 165), ("umount2", 166), ("pivot_root", 155),
                        ("open_tree", 428), ("move_mount", 429), ("fsopen", 430),
                        ("fsconfig", 431), ("fsmount", 432), ("fspick", 433),
                        ("mount_setattr", 442))])
            else:
                judge.misbehaved("the script never reached the end hold point")
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    if A.mount_table(os.getpid()) != host_before:
        judge.escape("the host's own mount table changed during the run")
    ok = [n for n in o.succeeded("") if n not in ("done",) and not n.startswith("open_tree")]
    if ok:
        judge.escape("the kernel let through: " + ", ".join(ok))
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
