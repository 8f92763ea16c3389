#!/usr/bin/python3
"""A script against the package environment mounted in its sandbox (--with-env): it writes into
the mount, creates files in it and beside it, changes its files' metadata, links across it,
reopens a file of it for writing through /proc/self/fd and by handle, remounts it read-write,
unmounts it, clones it (open_tree), clears its read-only flag (mount_setattr), and climbs out of
it with ".." to the store around it.

The environment is the harness's probe environment (tests/support/mounted_env.py, built once per
ctest run), copied into a store of the caller's as `env create` would leave it: root's files as
root, but uid 65534's as nobody, the same host uid the script runs as, so there only the mount's
read-only flag (and Landlock, seccomp) stand between the script and the files, whose modes let
their owner write. A secret lies at the store's top, beside envs/.

Contained when, judged from the host: every file and directory of the store (content, mode,
owner, times, inode, links) is as before and nothing was added, `env show --verify` still finds
the environment as its ID says, the secret never appears in the output, the sandbox's mount
table is the same before and after the attempts with /sandbox/.packages read-only in both, and
no write the script noted succeeded. Control: the script imports the environment's package
(so the mount was there to attack).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A  # noqa: E402
from support import mounted_env  # noqa: E402
from support.running import run  # noqa: E402

PACKAGES = "/sandbox/.packages"

SCRIPT = r'''
import os, struct
P = "/sandbox/.packages"
PKG = P + "/" + ARGS[2]
F = PKG + "/__init__.py"
store, secret_name = ARGS[0], ARGS[1]
probe = __import__(ARGS[2])
note("import", "ok: MOUNTED %r from %s" % (probe.MOUNTED, probe.__file__))
hold("before")

def write(path, mode="r+"):
    with open(path, mode) as f:
        f.write("pwned")

attempt("write r+", write, F)
attempt("write append", write, F, "a")
attempt("write truncate open", write, PKG + "/data.txt", "w")
attempt("write new file", write, PKG + "/added.py", "x")
attempt("write new top file", write, P + "/added_top.py", "x")
attempt("write new sitecustomize", write, P + "/sitecustomize.py", "x")
attempt("write beside the mount", write, "/sandbox/.packages-beside", "x")
attempt("write mkdir", os.mkdir, PKG + "/newdir")
attempt("write symlink", os.symlink, "/etc/passwd", PKG + "/link")
attempt("write mkfifo", os.mkfifo, PKG + "/fifo")
attempt("write rename", os.rename, PKG + "/data.txt", PKG + "/moved.py")
attempt("write rename the mount", os.rename, P, "/sandbox/moved")
attempt("write unlink", os.unlink, PKG + "/data.txt")
attempt("write rmdir", os.rmdir, PKG)
attempt("write chmod", os.chmod, F, 0o777)
attempt("write chmod dir", os.chmod, PKG, 0o777)
attempt("write chown to self", os.chown, F, os.getuid(), os.getgid())
attempt("write utime", os.utime, F, (0, 0))
attempt("write setxattr", os.setxattr, F, "user.pwned", b"1")
attempt("write truncate", os.truncate, F, 0)
attempt("write hard link out", os.link, F, "/tmp/hard")
open("/tmp/inside", "w").close()
attempt("write hard link in", os.link, "/tmp/inside", PKG + "/hard")

def reopen_rw():
    fd = os.open(F, os.O_PATH)
    return os.open("/proc/self/fd/%d" % fd, os.O_RDWR)
attempt("write reopen O_PATH rw", reopen_rw)

def by_handle():
    buf = ctypes.create_string_buffer(struct.pack("=Ii", 128, 0) + b"\0" * 128)
    mount_id = ctypes.c_int(0)
    r = syscall(303, -100, F.encode(), buf, ctypes.byref(mount_id), 0)  # name_to_handle_at
    note("name_to_handle_at", r)
    if r < 0:
        return r
    mount_fd = os.open(P, os.O_RDONLY | os.O_DIRECTORY)
    return syscall(304, mount_fd, buf, os.O_RDWR)  # open_by_handle_at
note("write open_by_handle_at rw", by_handle())

AT_FDCWD, MS_REMOUNT, MS_BIND, MS_RDONLY, MNT_DETACH = -100, 32, 4096, 1, 2
AT_RECURSIVE, OPEN_TREE_CLONE, AT_EMPTY_PATH, MOVE_MOUNT_F_EMPTY_PATH = 0x8000, 1, 0x1000, 4
os.makedirs("/tmp/m", exist_ok=True)
note("write remount rw", syscall(165, None, P.encode(), None, MS_REMOUNT | MS_BIND))
note("write bind over the mount", syscall(165, b"/tmp/m", P.encode(), None, MS_BIND))
note("write umount", syscall(166, P.encode(), MNT_DETACH))
attr = ctypes.create_string_buffer(struct.pack("=QQQQ", 0, MS_RDONLY, 0, 0))  # attr_clr
note("write mount_setattr clear RDONLY", syscall(442, AT_FDCWD, P.encode(), 0, attr, 32))
tree = syscall(428, AT_FDCWD, P.encode(), OPEN_TREE_CLONE)
note("write open_tree clone", tree)
if tree >= 0:
    note("write mount_setattr clone rw", syscall(442, tree, b"", AT_EMPTY_PATH, attr, 32))
    note("write move_mount clone", syscall(429, tree, b"", AT_FDCWD, b"/tmp/m",
                                           MOVE_MOUNT_F_EMPTY_PATH))
    attempt("write through the clone", write, "/tmp/m/" + ARGS[2] + "/__init__.py")
picked = syscall(433, AT_FDCWD, P.encode(), 0)
note("write fspick", picked)
if picked >= 0:
    note("write fsconfig rw", syscall(431, picked, 0, b"rw", None, 0))
    note("write fsconfig reconfigure", syscall(431, picked, 7, None, None, 0))

def read(path, **kw):
    fd = os.open(path, os.O_RDONLY, **kw)
    try:
        return os.read(fd, 4096).decode(errors="replace")
    finally:
        os.close(fd)
for up in ("..", "../..", "../../.."):
    attempt("list " + up, lambda: sorted(os.listdir(P + "/" + up))[:20])
    attempt("secret " + up, read, P + "/" + up + "/" + secret_name)
    root = os.open(P, os.O_PATH | os.O_DIRECTORY)
    attempt("secret openat " + up, read, up + "/" + secret_name, dir_fd=root)
attempt("secret by host path", read, store + "/" + secret_name)
attempt("env.json beside site", read, P + "/../env.json")
note("done", 0)
hold("end")
'''


def caller_uid() -> int:
    return A.NOBODY if A.RUN_AS == "nobody" else 0


def test():
    judge = A.Judge("writes into, beside and around a mounted package environment; remount, "
                    "unmount, clone; '..' out of it")
    store = A.shared_dir() / "store"
    env_id = mounted_env.copy_env(store, caller_uid())
    secret = A.new_secret()
    secret_name = f"secret-{secret[-8:]}.txt"
    A.write_file(store / secret_name, secret, mode=0o644, owner=caller_uid())
    before = A.tree_state(store)

    options = ["--with-env", env_id, "--cache-dir", str(store)]
    with A.Sandbox(SCRIPT, [str(store), secret_name, mounted_env.PROBE], options=options,
                   timeout=A.HOLDING_TIMEOUT) as sb:
        if not sb.wait_ready("before"):
            judge.misbehaved("the script never reached the hold point before the attempts")
        else:
            py = sb.python()
            mounts_before = A.mount_table(py.pid)
            sb.go()
            if sb.wait_ready("end"):
                mounts_after = A.mount_table(py.pid)
                A.check_same_mounts(judge, mounts_before, mounts_after)
                for table, when in ((mounts_before, "before"), (mounts_after, "after")):
                    rows = [row for row in table if row[1] == PACKAGES]
                    if not rows:
                        judge.misbehaved(f"{PACKAGES} is not a mount point {when} the attempts")
                    for row in rows:
                        if "ro" not in row[2].split(","):
                            judge.escape(f"{PACKAGES} is mounted read-write {when} the "
                                         f"attempts: {row}")
            else:
                judge.misbehaved("the script never reached the end hold point")
            sb.go()
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["import", "done"])
    A.check_secrets(judge, o, {"the secret beside the store's envs/": secret})
    if ok := o.succeeded("write"):
        judge.escape("the kernel let through: " + ", ".join(ok))
    after = A.tree_state(store)
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    if changed:
        judge.escape("the store changed on the host: "
                     + ", ".join(os.path.relpath(p, store) for p in changed[:8]))
    verified = run(["env", "show", env_id, "--verify", "--cache-dir", str(store)])
    if verified.returncode != 0:
        judge.escape("the environment no longer verifies" + verified.describe())
    judge.done(o.describe() + "\nnotes: " + json.dumps(o.notes())[:3000])


if __name__ == "__main__":
    A.main(test)
