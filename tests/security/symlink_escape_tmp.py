#!/usr/bin/python3
"""Escape /tmp through symlinks: links in the writable /tmp that point at host places.

Targets a world-writable host directory (in the host's /tmp) and a world-writable directory
inside the bound /usr, so that permissions alone would allow the writes. The script plants
symlinks in /tmp/work pointing there directly, through /proc/1/root, /proc/self/root,
/proc/self/cwd and ../ chains, and through a symlinked directory, then creates and writes
files through each, also with O_CREAT on dangling links and via os.replace of a link over a
directory. Contained when the host directories are unchanged.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os
host_tmp, fixture = ARGS[:2]
os.chdir("/tmp/work")
targets = []
for base in (host_tmp, fixture):
    for prefix in ("", "/proc/1/root", "/proc/self/root", "/proc/self/cwd/../../..", "/../..",
                   "/proc/2/cwd/../../.."):
        targets.append(prefix + base)
for i, t in enumerate(targets):
    link = "dlink%d" % i
    attempt("symlink dir %s" % t, os.symlink, t, link)
    attempt("write via dir link %s" % t,
            lambda: open(os.path.join(link, "pwned-%s-%d" % (MARKER, i)), "w").write("x"))
    flink = "flink%d" % i
    attempt("symlink file %s" % t, os.symlink, os.path.join(t, "pwned-%s-f%d" % (MARKER, i)),
            flink)
    attempt("O_CREAT via dangling link %s" % t, lambda: os.close(os.open(flink, os.O_CREAT |
            os.O_WRONLY, 0o644)))
# A chain of links, and a link to /tmp's parent directory.
attempt("chain", lambda: (os.symlink("/", "root"), os.symlink("root/" + host_tmp.lstrip("/"),
        "chain"), open("chain/pwned-%s-chain" % MARKER, "w").write("x")))
attempt("link to /tmp/..", lambda: (os.symlink("/tmp/..", "up"),
        open("up/pwned-%s-up" % MARKER, "w").write("x")))
note("done", 0)
'''


def test():
    judge = A.Judge("symlinks out of /tmp to host directories")
    host_tmp = A.shared_dir(mode=0o777)
    fixture = A.usr_fixture_dir(mode=0o777)
    before = {str(host_tmp): A.tree_state(host_tmp), str(fixture): A.tree_state(fixture)}
    sb = A.Sandbox(SCRIPT, [host_tmp, fixture])
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    for root, state in before.items():
        after = A.tree_state(root)
        if after != state:
            new = sorted(set(after) - set(state))
            judge.escape(f"host directory {root} changed: {new[:4]}")
    for p in ("/pwned-" + sb.marker + "-up",):
        if os.path.lexists(p):
            judge.escape(f"{p} created on the host")
            A.remove(p)
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
