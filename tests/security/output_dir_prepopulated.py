#!/usr/bin/python3
"""Plant code in a project through --output-dir: artifacts that land inside existing trees.

A caller points --output-dir at a directory that already holds things (a checkout, a virtualenv,
a package). "Existing files are never overwritten" does not stop a NEW file in an existing
directory, and some of those run later on the host: a .pth file in site-packages runs at every
interpreter start, .git/hooks/pre-commit at the next commit, conftest.py at the next pytest.
DIR holds .venv/lib/python3.11/site-packages/, .git/hooks/ and pkg/__init__.py; the script
writes .venv/lib/python3.11/site-packages/evil.pth, .git/hooks/pre-commit and pkg/conftest.py
into /tmp/work.

Contained when pysandbox refuses the non-empty DIR: exit 125, a message on stderr that names
--output-dir, nothing under DIR changed (tree_state), and no evil file exists under DIR or its
parent. Control, same script: with DIR absent (its parent exists) the run creates DIR and the
artifacts land there, so the refusal is about the populated directory, not --output-dir broken.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

NO_KERNEL = (  # no kernel variant (attack.py, PYSANDBOX_VIA)
    "--output-dir: a kernel has none"
)

PLANTS = [".venv/lib/python3.11/site-packages/evil.pth", ".git/hooks/pre-commit",
          "pkg/conftest.py"]

SCRIPT = r'''
import os
plants = {
    ".venv/lib/python3.11/site-packages/evil.pth": "import os; os.system('id > /tmp/pwned')\n",
    ".git/hooks/pre-commit": "#!/bin/sh\nid > /tmp/pwned\n",
    "pkg/conftest.py": "import os\nos.system('id > /tmp/pwned')\n",
}
for rel, text in plants.items():
    path = os.path.join("/tmp/work", rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "# " + MARKER + "\n")
    os.chmod(path, 0o755)
note("done", 0)
'''


def caller_uid() -> int:
    return A.NOBODY if A.RUN_AS == "nobody" else 0


def populate(root) -> None:
    uid = caller_uid()
    for d in (".venv/lib/python3.11/site-packages", ".git/hooks", "pkg"):
        os.makedirs(root / d, mode=0o755)
    A.write_file(root / "pkg" / "__init__.py", "")
    A.write_file(root / ".git" / "HEAD", "ref: refs/heads/main\n")
    A.write_file(root / ".venv" / "lib" / "python3.11" / "site-packages" / "six.py", "# six\n")
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [""] + dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, uid)


def test():
    judge = A.Judge("artifacts planted inside a pre-populated --output-dir")
    parent = A.shared_dir(owner=caller_uid())
    out = parent / "project"
    out.mkdir()
    populate(out)
    before = A.tree_state(out)
    sb = A.Sandbox(SCRIPT, options=["--output-dir", str(out)], timeout="10s")
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0, A.SANDBOX_ERROR))
    if o.rc != A.SANDBOX_ERROR:
        judge.escape(f"pysandbox accepted a non-empty --output-dir (exit {o.rc}, not 125)")
    elif b"--output-dir" not in o.stderr:
        judge.misbehaved("exit 125 without a message naming --output-dir on stderr")
    after = A.tree_state(out)
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    if changed:
        judge.escape("under DIR changed: "
                     + ", ".join(os.path.relpath(p, out) for p in changed[:8]))
    for dirpath, dirnames, filenames in os.walk(parent):
        for name in filenames:
            if name in ("evil.pth", "pre-commit", "conftest.py"):
                judge.escape(f"{os.path.join(dirpath, name)} was planted on the host")

    # Control: an absent DIR (its parent exists) is created and receives the artifacts.
    fresh = parent / "fresh-output"
    sb2 = A.Sandbox(SCRIPT, options=["--output-dir", str(fresh)], timeout="10s")
    o2 = sb2.run()
    A.check_behaved(judge, sb2, allowed=(0,), expect_notes=["done"])
    missing = [rel for rel in PLANTS
               if sb2.marker.encode() not in
               (A.read_bytes(str(sb2.artifact_dir(fresh) / rel)) or b"")]
    if missing:
        judge.misbehaved("with an absent --output-dir the artifacts did not land in the DIR the "
                         "run created (" + ", ".join(missing) + "): --output-dir does not work, "
                         "so the refusal proves nothing")
    judge.done(o.describe() + "\n=== control (absent DIR)\n" + o2.describe())


if __name__ == "__main__":
    A.main(test)
