#!/usr/bin/python3
"""Send the supervisor init's own records: a forged setup failure, seccomp listener and /tmp/work.

Init reports to the supervisor on a socket (src/wire/report.hpp): the seccomp notification fd, the
open /tmp/work the artifacts are copied from, a setup step that failed, how the script ended. A
cloned sandbox's execve closes that socket; a forked job (batch --fork) never execs, and once
held it. The script sends, on every socket it holds but its driver's channel, a forged
"setup failed" record, a "listener" carrying a pipe (the real one replaced: denied calls would
go unseen) and a "work_dir" carrying the sandbox's /usr (a supervisor running as root would
copy out files the sandbox cannot read); then it makes a denied call (ptrace), writes one
artifact and exits 3.

Contained when, judged on the host: the run exits 3 with status "error" (not a sandbox error),
the result names the ptrace denial among its violations, and --output-dir holds exactly the
one artifact the script wrote.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

NO_KERNEL = (  # no kernel variant (attack.py, PYSANDBOX_VIA)
    "--output-dir, the work_dir record's target: a kernel has no --output-dir"
)

SCRIPT = r'''
import ctypes, os, socket, stat, struct

def record(kind):
    # struct Report: kind, step, error, wait_status, cpu_us, max_rss_kib, exec_mono_ns, detail
    return struct.pack("<Iiiiqqq", kind, 2, 13, 0, 0, 0, 0) + b"forged".ljust(256, b"\0")

r, w = os.pipe()
os.write(w, b"x")
usr = os.open("/usr", os.O_RDONLY | os.O_DIRECTORY)
for fd in range(3, 64):
    if fd in DRIVER_FDS:
        continue
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            continue
    except OSError:
        continue
    s = socket.socket(fileno=os.dup(fd))
    s.settimeout(0.5)
    for kind, passed in ((1, None), (4, r), (6, usr)):
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", passed))] if passed else []
        attempt("send kind %d on %d" % (kind, fd), s.sendmsg, [record(kind)], rights)
libc = ctypes.CDLL(None, use_errno=True)
note("ptrace", libc.ptrace(0, 0, 0, 0))
with open("/tmp/work/mine.txt", "w") as f:
    f.write("mine\n")
note("done", 0)
raise SystemExit(3)
'''


def test():
    judge = A.Judge("init's records forged by the script")
    out = A.shared_dir(owner=A.NOBODY if A.RUN_AS == "nobody" else 0) / "out"
    sb = A.Sandbox(SCRIPT, options=["--json", "--output-dir", str(out)], timeout="10s")
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(3,))
    r = A.check_result(judge, o)
    if r:
        if (r.get("status"), r.get("exit_code")) != ("error", 3):
            judge.escape(f"the result is status {r.get('status')!r}, exit {r.get('exit_code')!r}"
                         f" ({r.get('message')!r}), not the script's exit 3")
        # Under gVisor a denied call gets EPERM from gVisor's filter with no record for
        # pysandbox (src/plan/gvisor.hpp), so no violation names it; there is no listener to
        # replace either. The exit status and the artifacts are judged as for every via.
        if A.VIA != "gvisor" and \
                "ptrace" not in [v.get("what") for v in r.get("violations") or []]:
            judge.escape(f"the denied ptrace is not among the violations: {r.get('violations')}")
    found = sorted(os.path.relpath(os.path.join(d, f), out)
                   for d, _, files in os.walk(out) for f in files)
    # One directory per job or cell (job-1/, cell-1/, call-1/) through the other fronts.
    if [os.path.basename(f) for f in found] != ["mine.txt"]:
        judge.escape(f"--output-dir holds {found[:8]} ({len(found)} files), not just mine.txt")
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
