#!/usr/bin/python3
"""Artifacts that follow a directory someone else made in --output-dir during the run.

DIR is empty when the run starts. The script writes /tmp/work/sub/x.py and /tmp/work/top.txt and
holds; while it holds, another host process (the test, as root) creates DIR/sub itself, owned
like DIR, so permissions do not stand in the way. A copy that reuses an existing directory puts
x.py into a directory the run did not create (what an attacker who can create DIR/sub could
point anywhere, or what a concurrent tool owns). Run with --json so each artifact's fate is
reported.

Contained when, after the run, DIR/sub/x.py does not exist, DIR/top.txt arrived with its
content, and the result's files[] entry for sub/x.py has host_path null and a non-empty
"skipped" reason (while top.txt's host_path exists).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

RUN_ONLY = (  # no session, batch or mcp variant (attack.py, PYSANDBOX_VIA)
    "a session copies a cell's artifacts into DIR/cell-N, a directory it makes at the "
    "cell's end and refuses if it exists, so no directory below it can be made for it to "
    "reuse while the cell runs"
)

SCRIPT = r'''
import os
os.makedirs("/tmp/work/sub")
with open("/tmp/work/sub/x.py", "w") as f:
    f.write("print('x') # " + MARKER + "\n")
with open("/tmp/work/top.txt", "w") as f:
    f.write("top " + MARKER + "\n")
note("written", 0)
hold_quiet("written")
note("done", 0)
'''


def test():
    judge = A.Judge("artifacts copied into a directory created in --output-dir during the run")
    owner = A.NOBODY if A.RUN_AS == "nobody" else 0
    parent = A.shared_dir(owner=owner)
    out = parent / "out"
    out.mkdir(mode=0o755)
    os.chown(out, owner, owner)
    with A.Sandbox(SCRIPT, options=["--output-dir", str(out), "--json"], timeout="15s") as sb:
        if sb.wait_quiet("written"):
            os.mkdir(out / "sub", 0o755)
            os.chown(out / "sub", owner, owner)
            sb.go()
        else:
            judge.misbehaved("the script never reached the hold point")
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    r = A.check_result(judge, o)
    planted = out / "sub" / "x.py"
    if os.path.lexists(planted):
        judge.escape(f"{planted} was written into a directory the run did not create")
    top = A.read_bytes(str(out / "top.txt"))
    if top != f"top {sb.marker}\n".encode():
        judge.misbehaved(f"top.txt did not arrive in DIR ({top!r}): the copy does not work, so "
                         "nothing is proven")
    files = {f.get("path"): f for f in r.get("files") or [] if isinstance(f, dict)}
    entry = files.get("sub/x.py")
    if r and entry is None:
        judge.misbehaved("the result's files[] has no entry for sub/x.py")
    elif entry is not None:
        if entry.get("host_path") is not None:
            judge.escape(f"files[] says sub/x.py was copied to {entry.get('host_path')!r}")
        if not entry.get("skipped"):
            judge.escape("files[] gives no 'skipped' reason for sub/x.py")
    t = files.get("top.txt")
    if r and (t is None or not t.get("host_path") or not os.path.exists(t["host_path"])):
        judge.misbehaved(f"files[] does not give top.txt a host_path that exists: {t}")
    judge.done(o.describe() + f"\nfiles: {list(files.values())}")


if __name__ == "__main__":
    A.main(test)
