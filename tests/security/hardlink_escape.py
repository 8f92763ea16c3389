#!/usr/bin/python3
"""Escape through hard links: link host files into the writable /tmp, then write them.

Host fixture inside the bound /usr: a world-writable directory with a file owned by the
sandbox's host uid (0666) and a root-owned 0644 file. The script hard-links them into /tmp (a
different mount: EXDEV expected) directly, with linkat(AT_SYMLINK_FOLLOW) on /proc/self/fd,
linkat(AT_EMPTY_PATH) on an O_PATH fd, and within the fixture directory itself, then writes
through any link it got. Contained when the fixture is byte-for-byte and inode-for-inode
unchanged (link counts included).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os
fixture = ARGS[0]
mine = os.path.join(fixture, "mine.txt")
roots = os.path.join(fixture, "roots.txt")
os.chdir("/tmp/work")
AT_FDCWD, AT_SYMLINK_FOLLOW, AT_EMPTY_PATH = -100, 0x400, 0x1000
libc.linkat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
def linkat(olddirfd, old, newdirfd, new, flags):
    if libc.linkat(olddirfd, old.encode(), newdirfd, new.encode(), flags) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
got = []
for src in (mine, roots):
    tag = os.path.basename(src)
    for how, fn in (
            ("link", lambda: os.link(src, "l-" + tag)),
            ("link in fixture", lambda: os.link(src, src + ".hl")),
            ("linkat /proc/self/fd", lambda: linkat(AT_FDCWD, "/proc/self/fd/%d" %
                                                    os.open(src, os.O_RDONLY), AT_FDCWD,
                                                    "p-" + tag, AT_SYMLINK_FOLLOW)),
            ("linkat O_PATH AT_EMPTY_PATH", lambda: linkat(os.open(src, os.O_PATH), "",
                                                          AT_FDCWD, "e-" + tag, AT_EMPTY_PATH))):
        if not isinstance(attempt("%s %s" % (how, tag), fn), Exception):
            got.append(how)
for name in os.listdir("."):
    attempt("write through " + name, lambda: open(name, "a").write("pwned"))
    attempt("chmod through " + name, os.chmod, name, 0o4777)
note("done", 0)
'''


def test():
    judge = A.Judge("hard links of host files into /tmp")
    fixture = A.usr_fixture_dir(mode=0o777)
    A.write_file(fixture / "mine.txt", "owned by the sandbox uid\n", mode=0o666, owner=A.NOBODY)
    A.write_file(fixture / "roots.txt", "owned by root\n", mode=0o644)
    before = A.tree_state(fixture)
    sb = A.Sandbox(SCRIPT, [fixture])
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    after = A.tree_state(fixture)
    if after != before:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        judge.escape(f"host fixture changed: {changed}")
    linked = [w for w in o.succeeded("link")]
    if linked:
        judge.escape("hard links to host files were made: " + ", ".join(linked))
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
