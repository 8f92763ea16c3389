#!/usr/bin/python3
"""Artifact names that are not UTF-8: make the result lie about where files went.

The JSON result is UTF-8; a file name is bytes. The script creates /tmp/work/b"\xff\xfe-bad.txt",
a directory b"\xc3(-dir" holding b"\xed\xa0\x80-surrogate.txt", and good.txt, and the run has
--json --output-dir DIR (empty). If the name is replaced (U+FFFD) in the result but copied under
its real bytes, a caller that trusts host_path opens nothing, or a different file that happens
to carry the replaced name.

Contained when every files[] entry either has a host_path that exists on the host (os.path.exists
of the string, as a caller would use it) or has host_path null and a non-empty "skipped"; no
host_path with U+FFFD points at nothing; every file the run put into DIR is one a host_path names
(nothing unreported landed); and good.txt arrived with its content.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

NO_KERNEL = (  # no kernel variant (attack.py, PYSANDBOX_VIA)
    "the artifacts of --output-dir and where the --json result says they went: a kernel has "
    "neither"
)

SCRIPT = r'''
import os
def put(name, text):
    with open(b"/tmp/work/" + name, "wb") as f:
        f.write(text.encode() + MARKER.encode() + b"\n")
attempt("bad name", put, b"\xff\xfe-bad.txt", "bad ")
attempt("bad dir", os.mkdir, b"/tmp/work/\xc3(-dir")
attempt("surrogate name", put, b"\xc3(-dir/\xed\xa0\x80-surrogate.txt", "surrogate ")
put(b"good.txt", "good ")
note("done", 0)
'''


def test():
    judge = A.Judge("artifact names that are not valid UTF-8")
    owner = A.NOBODY if A.RUN_AS == "nobody" else 0
    parent = A.shared_dir(owner=owner)
    out = parent / "out"
    out.mkdir(mode=0o755)
    os.chown(out, owner, owner)
    sb = A.Sandbox(SCRIPT, options=["--output-dir", str(out), "--json"], timeout="10s")
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    r = A.check_result(judge, o)
    files = [f for f in r.get("files") or [] if isinstance(f, dict)]
    named = set()
    for f in files:
        host_path = f.get("host_path")
        if host_path is None:
            if not f.get("skipped"):
                judge.escape(f"files[] entry {f.get('path')!r} has neither a host_path nor a "
                             "skipped reason")
            continue
        if not isinstance(host_path, str) or not os.path.exists(host_path):
            bad = " (it holds U+FFFD)" if "\ufffd" in str(host_path) else ""
            judge.escape(f"files[] entry {f.get('path')!r} names host_path {host_path!r}, which "
                         f"does not exist{bad}")
            continue
        named.add(os.path.realpath(host_path).encode("utf-8", "surrogateescape"))
    for dirpath, dirnames, filenames in os.walk(bytes(out)):
        for name in filenames:
            p = os.path.realpath(os.path.join(dirpath, name))
            if p not in named:
                judge.escape(f"{p!r} landed in DIR but no files[] host_path names it")
    good = A.read_bytes(str(sb.artifact_dir(out) / "good.txt"))
    if good != f"good {sb.marker}\n".encode():
        judge.misbehaved(f"good.txt did not arrive ({good!r}): the copy does not work")
    if r and not any(f.get("path") == "good.txt" for f in files):
        judge.misbehaved("files[] has no entry for good.txt")
    judge.done(o.describe() + f"\nfiles: {files}")


if __name__ == "__main__":
    A.main(test)
