#!/usr/bin/python3
"""Learn host paths from the sandbox's mount table.

An --input file and a --workdir are bind mounts of host paths, and /proc/self/mountinfo shows
each mount's root: the path of the bound file or directory inside its host filesystem (user
names, project names, customer names, ticket numbers...). The test puts the input at
/tmp/<HOSTDIR-token>/<HOSTNAME-token>.csv (given as data.csv) in one run, and binds a directory
named WORKDIR-<token> as --workdir in another. The script reads every /proc/*/mountinfo,
/proc/*/mounts and /proc/*/mountstats it can, its own environ and cmdline, the targets of its
fds and cwd, and walks / (not /proc or /sys) collecting every name, and prints it all.

Contained when none of the tokens appears anywhere in what the runs printed (and the output
was not cut, which could hide one). Through a session, batch, MCP or a kernel (PYSANDBOX_VIA),
which have no --workdir, only the --input run is made; through a kernel, which prints no --json
result, what the client got is judged (the streams, the kernel's own stderr) and the verdict of
its execute_reply says whether the output was cut. Through MCP, whose answer shortens output over
2 MiB, the script prints the names it walked deflated (zlib, base64), and the host inflates them.
Through gVisor (both runs) the walk stops at /usr's own entries: the host's /usr, bound as in every
via, is too slow to walk through gVisor's file proxy.
"""
import base64
import os
import sys
import uuid
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os
out = []
def emit(label, data):
    if isinstance(data, bytes):
        data = data.decode("utf-8", "backslashreplace")
    out.append("== %s\n%s" % (label, data))

pids = ["self", "thread-self"] + [p for p in os.listdir("/proc") if p.isdigit()]
for pid in pids:
    for name in ("mountinfo", "mounts", "mountstats", "environ", "cmdline", "maps"):
        path = "/proc/%s/%s" % (pid, name)
        try:
            with open(path, "rb") as f:
                emit(path, f.read())
        except OSError:
            pass
    for link in ("cwd", "root", "exe"):
        try:
            emit("/proc/%s/%s" % (pid, link), os.readlink("/proc/%s/%s" % (pid, link)))
        except OSError:
            pass
    try:
        for fd in os.listdir("/proc/%s/fd" % pid):
            try:
                emit("fd %s/%s" % (pid, fd), os.readlink("/proc/%s/fd/%s" % (pid, fd)))
            except OSError:
                pass
    except OSError:
        pass
names = set()
for root, dirs, files in os.walk("/", onerror=lambda e: None):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys")]
    if root == "/usr" and "skip-usr" in ARGS:
        dirs[:] = []
    for n in dirs + files:
        names.add(n)
    for n in files:
        p = os.path.join(root, n)
        if os.path.islink(p):
            try:
                names.add(os.readlink(p))
            except OSError:
                pass
if ARGS[:1] == ["zlib"]:
    import base64, zlib
    packed = zlib.compress("\n".join(sorted(names)).encode("utf-8", "surrogateescape"), 9)
    emit("names zlib", base64.b64encode(packed).decode())
else:
    emit("names", "\n".join(sorted(names)))
sys.stdout.write("\n".join(out) + "\n")
note("done", len(names))
'''


def inflated(stdout: bytes) -> bytes:
    """The names the script printed deflated ("== names zlib"), inflated; b"" if none."""
    head = b"== names zlib\n"
    if head not in stdout:
        return b""
    packed = stdout.split(head, 1)[1].split(b"\n", 1)[0]
    try:
        return zlib.decompress(base64.b64decode(packed))
    except (ValueError, zlib.error) as e:
        raise A.Verdict(f"the deflated names do not inflate: {e}")


def test():
    judge = A.Judge("host paths in /proc/self/mountinfo")
    tokens = {}
    # --input: a distinctive directory and file name on the host.
    tokens["input directory"] = f"HOSTDIR-{uuid.uuid4().hex}"
    tokens["input file"] = f"HOSTNAME-{uuid.uuid4().hex}"
    parent = A.shared_dir()
    indir = parent / tokens["input directory"]
    indir.mkdir(mode=0o755)
    data = A.write_file(indir / f"{tokens['input file']}.csv", "a,b\n1,2\n")
    # Through gVisor the walk does not go below /usr: the host's /usr, bound read-only as in
    # every via (the input and the workdir are elsewhere), whose 200,000 names take gVisor's
    # file proxy half a minute.
    args = ["zlib"] if A.VIA == "mcp" else ["skip-usr"] if A.VIA == "gvisor" else []
    sb1 = A.Sandbox(SCRIPT, args,
                    options=[*A.RESULT_OPTIONS, "--input", f"{data}=data.csv"], timeout="20s",
                    keep=64 << 20)
    o1 = sb1.run()
    A.check_behaved(judge, sb1, allowed=(0,), expect_notes=["done"])
    runs = [("--input run", o1)]
    # --workdir: a distinctive directory name on the host. Run only: a session has no --workdir.
    if A.VIA in ("run", "gvisor"):
        tokens["workdir"] = f"WORKDIR-{uuid.uuid4().hex}"
        workdir = parent / tokens["workdir"]
        workdir.mkdir(mode=0o755)
        os.chown(workdir, A.NOBODY, A.NOBODY)
        sb2 = A.Sandbox(SCRIPT, args, options=["--json", "--workdir", str(workdir)],
                        timeout="20s", keep=64 << 20)
        o2 = sb2.run()
        A.check_behaved(judge, sb2, allowed=(0,), expect_notes=["done"])
        runs.append(("--workdir run", o2))
    for label, o in runs:
        # What the script saw is what it printed: the result's stdout and stderr (with --json,
        # so that pysandbox's own messages to the caller are not mistaken for it).
        r = A.check_verdict(judge, o)
        if any((r.get("truncated") or {}).values()):
            judge.misbehaved(f"{label}: the output was cut by the output limit, so a leak "
                             "could hide in the omitted part")
        stderr = o.stderr if A.VIA == "kernel" else \
            str(r.get("stderr", "")).encode("utf-8", "replace")
        seen = o.script_stdout() + b"\n" + stderr
        seen += b"\n" + inflated(seen)
        for what, token in tokens.items():
            if token.encode() in seen:
                i = seen.index(token.encode())
                context = seen[max(0, seen.rfind(b"\n", 0, i)):i + len(token) + 40]
                judge.escape(f"{label}: the {what} name {token} reached the script: "
                             f"{context.strip()[:200]!r}")
    judge.done("\n".join(f"{label}: exit {o.rc}, {len(o.stdout)} bytes, stderr "
                         f"{o.stderr[-500:]!r}" for label, o in runs))


if __name__ == "__main__":
    A.main(test)
