#!/usr/bin/python3
"""Undo the sandbox's filesystem view: umount masks and binds, pivot_root, chroot escapes.

The script unmounts the masks over /proc (kallsyms, keys, sysrq-trigger...), /proc/sys, /proc,
/usr, /tmp and / (with and without MNT_DETACH), calls pivot_root two ways, and does the classic
chroot escape (chroot into a subdirectory, then walk ".." from a directory fd kept outside).
Judged from the host: the sandboxed process's mount table and its root directory (the inode
behind /proc/PID/root) are the same before and after, and the seccomp filter denies umount2,
pivot_root and chroot.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os
hold("before")
MNT_FORCE, MNT_DETACH = 1, 2
for target in ("/proc/kallsyms", "/proc/keys", "/proc/sysrq-trigger", "/proc/kcore",
               "/proc/timer_list", "/proc/sys", "/proc", "/usr", "/tmp", "/dev/null", "/"):
    note("umount " + target, syscall(166, target.encode(), 0))
    note("umount MNT_DETACH " + target, syscall(166, target.encode(), MNT_DETACH))
os.makedirs("/tmp/work/old", exist_ok=True)
note("pivot_root /tmp", syscall(155, b"/tmp", b"/tmp/work/old"))
os.chdir("/")
note("pivot_root . .", syscall(155, b".", b"."))
os.chdir("/tmp/work")
os.makedirs("/tmp/work/jail", exist_ok=True)
outside = os.open("/", os.O_RDONLY)
r = attempt("chroot jail", os.chroot, "/tmp/work/jail")
if r is None:
    os.fchdir(outside)
    for _ in range(64):
        os.chdir("..")
    attempt("chroot . after walking up", os.chroot, ".")
    print("LISTDIR", os.listdir("/"), flush=True)
note("done", 0)
hold()
'''


def root_identity(pid: int):
    st = os.stat(f"/proc/{pid}/root/")
    return (st.st_dev, st.st_ino)


def test():
    judge = A.Judge("umount of masks/binds, pivot_root, chroot escapes")
    with A.Sandbox(SCRIPT) as sb:
        if not sb.wait_ready("before"):
            judge.misbehaved("the script never started")
        else:
            py = sb.python()
            before = (A.mount_table(py.pid), root_identity(py.pid))
            sb.go()
            if sb.wait_ready("end"):
                after = (A.mount_table(py.pid), root_identity(py.pid))
                if after[0] != before[0]:
                    gone = [m[1] for m in before[0] if m not in after[0]]
                    new = [m[1] for m in after[0] if m not in before[0]]
                    judge.escape(f"the sandbox's mounts changed: gone {gone[:5]}, new {new[:3]}")
                if after[1] != before[1]:
                    judge.escape("the script's root directory changed (chroot/pivot_root)")
                A.check_filter_denies(judge, sb.filters(), [
                    ("umount2", 166, A.AUDIT_ARCH_X86_64, ()),
                    ("pivot_root", 155, A.AUDIT_ARCH_X86_64, ()),
                    ("chroot", 161, A.AUDIT_ARCH_X86_64, ())])
            else:
                judge.misbehaved("the script never reached the end hold point")
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    ok = o.succeeded("umount") + o.succeeded("pivot_root") + o.succeeded("chroot")
    if ok:
        judge.escape("the kernel let through: " + ", ".join(ok))
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
