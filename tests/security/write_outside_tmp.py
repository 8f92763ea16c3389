#!/usr/bin/python3
"""Write outside /tmp: create, modify, rename, chmod and xattr host files.

The host provides targets that plain permissions would let the script's uid change, so only
the sandbox (read-only binds, Landlock) stands in the way: a world-writable directory inside
the bound /usr holding a file owned by uid 65534 (mode 0666) and a world-writable directory in
the host's /tmp. The script also tries /, /etc, /dev, /proc, /sandbox, /usr, /var and its own
script file. Contained when the host sees no change to any of them and no file carrying the
run's marker appeared in any host directory it tried.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os
fixture, victim, host_tmp = ARGS[:3]
name = "pwned-" + MARKER
dirs = ["/", "/etc", "/dev", "/proc", "/sandbox", "/usr", "/usr/bin", "/usr/lib", "/bin", "/lib",
        "/var", "/var/tmp", "/home", "/root", "/run", "/dev/shm", "/proc/sys/kernel",
        fixture, host_tmp, "/proc/1/root" + fixture, "/proc/self/root/usr"]
for d in dirs:
    p = os.path.join(d, name)
    attempt("create " + p, lambda p=p: open(p, "w").write("x"))
    attempt("mkdir " + p + ".d", os.mkdir, p + ".d")
    attempt("mkfifo " + p + ".fifo", os.mkfifo, p + ".fifo")
    attempt("symlink " + p + ".lnk", os.symlink, "/etc/passwd", p + ".lnk")
for op, fn in (
        ("append", lambda: open(victim, "a").write("pwned")),
        ("truncate", lambda: os.truncate(victim, 0)),
        ("O_RDWR write", lambda: os.write(os.open(victim, os.O_RDWR), b"pwned")),
        ("chmod", lambda: os.chmod(victim, 0o4777)),
        ("utime", lambda: os.utime(victim, (0, 0))),
        ("setxattr", lambda: os.setxattr(victim, "user.pwned", b"1")),
        ("rename", lambda: os.rename(victim, victim + ".moved")),
        ("unlink", lambda: os.unlink(victim)),
        ("link", lambda: os.link(victim, victim + ".link")),
        ("write script", lambda: open(sys.argv[0], "a").write("pwned")),
        ("chmod script", lambda: os.chmod(sys.argv[0], 0o777)),
        ("rmdir fixture", lambda: os.rmdir(fixture)),
        ("chmod fixture", lambda: os.chmod(fixture, 0o700))):
    attempt("victim " + op, fn)
note("done", 0)
'''


def test():
    judge = A.Judge("writes outside /tmp (ro binds of /usr, /, /etc, host /tmp)")
    fixture = A.usr_fixture_dir(mode=0o777)
    victim = A.write_file(fixture / "victim.txt", "original\n", mode=0o666, owner=A.NOBODY)
    host_tmp = A.shared_dir(mode=0o777)
    before = {str(fixture): A.tree_state(fixture), str(host_tmp): A.tree_state(host_tmp)}
    sb = A.Sandbox(SCRIPT, [fixture, victim, host_tmp])
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    name = "pwned-" + sb.marker
    for d in ("/", "/etc", "/dev", "/usr", "/usr/bin", "/usr/lib", "/bin", "/lib", "/var",
              "/var/tmp", "/home", "/root", "/run", "/dev/shm", "/tmp", "/sandbox"):
        for suffix in ("", ".d", ".fifo", ".lnk"):
            p = os.path.join(d, name + suffix)
            if os.path.lexists(p):
                judge.escape(f"{p} was created on the host")
                A.remove(p)
    for root, state in before.items():
        after = A.tree_state(root)
        if after != state:
            changed = sorted(k for k in set(state) | set(after) if state.get(k) != after.get(k))
            judge.escape(f"host files changed: {changed[:5]}")
    ok = [w for w in o.succeeded("victim ") + o.succeeded("create ") + o.succeeded("mkdir ")]
    if ok:
        judge.escape("the script reports success for: " + ", ".join(ok[:5]))
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
