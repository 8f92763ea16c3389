#!/usr/bin/python3
"""Erase the record of what the [policy] audit hook blocked.

Under a profile with a [policy], the hook inside the interpreter writes each block to a
channel pysandbox reads after the run (fd 4; under gVisor a socket the hook connected to, at the
descriptor it got), and those records become the result's violations and the incident log entry.
The channel is the script's to write, too. The script (profile "default") triggers two blocks,
os.system("true") and subprocess.Popen(["true"]), catching both, then tries to make them vanish,
on the channel (under gVisor, every socket it holds): lseek(fd, 0) and 64 KiB of NULs over them, ftruncate(fd, 0), a read
of what is there, then junk lines and a partial last line; under gVisor it also connects to the
channel's socket again and sends junk; it triggers nothing else and exits 0.

Contained when the --json result's violations (through a kernel: its execute_reply's verdict's)
still hold both blocks (kind "call", os.system
and subprocess.Popen) and the --incident-log entry of the run lists both. Control, first: the
same blocks without the erasing must be reported that way, or the test proves nothing.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import _socket, os, stat, subprocess
attempt("os.system", os.system, "true")
attempt("subprocess.Popen", subprocess.Popen, ["true"])
if ARGS[0] == "erase":
    def is_socket(fd):
        try:
            return stat.S_ISSOCK(os.fstat(fd).st_mode)
        except OSError:
            return False
    # fd 4; under gVisor, where the hook connected (a session's driver holds its own channel too,
    # which is not this attack's).
    channels = [4] if is_socket(4) else [fd for fd in range(3, 64) if is_socket(fd)]
    note("channels", "%d found" % len(channels))
    for fd in channels:
        os.set_blocking(fd, False)
        attempt("lseek(%d, 0)" % fd, os.lseek, fd, 0, os.SEEK_SET)
        attempt("write NULs", os.write, fd, b"\0" * 65536)
        attempt("ftruncate(%d, 0)" % fd, os.ftruncate, fd, 0)
        attempt("read(%d)" % fd, os.read, fd, 65536)
        attempt("lseek(%d, 0) again" % fd, os.lseek, fd, 0, os.SEEK_SET)
        attempt("write junk", os.write, fd, b"junk\n\tcall\nimport\t\nhook\tuninstalled\n" * 64
                + b"\xff\xfe\n" + b"call\tos.sys")
    channel_dir = "/run/pysandbox-gvisor/channel"
    for name in (os.listdir(channel_dir) if os.path.isdir(channel_dir) else []):
        again = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        if attempt("connect again", again.connect, channel_dir + "/" + name) is None:
            attempt("send on it", again.send, b"hook\tuninstalled")
note("done", 0)
'''

BLOCKS = {("call", "os.system"), ("call", "subprocess.Popen")}


def one_run(judge: A.Judge, mode: str, logdir) -> tuple[set, set, str]:
    log = logdir / f"incidents-{mode}.jsonl"
    sb = A.Sandbox(SCRIPT, [mode], options=["-p", "default", *A.RESULT_OPTIONS,
                                            "--incident-log", str(log)], timeout="10s")
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0, 1), expect_notes=["done"])
    if mode == "erase" and o.note("channels") in (None, "0 found"):
        judge.misbehaved("the script found no channel to attack")
    r = A.check_verdict(judge, o)
    reported = {(v.get("kind"), v.get("what")) for v in r.get("violations") or []
                if isinstance(v, dict)}
    logged = set()
    for line in (A.read_bytes(str(log)) or b"").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            judge.misbehaved(f"{mode}: an incident log line does not parse: {line[:200]!r}")
            continue
        logged |= {(b.get("kind"), b.get("what")) for b in entry.get("blocked") or []
                   if isinstance(b, dict)}
    return reported, logged, f"=== {mode}\n{o.describe()}"


def test():
    judge = A.Judge("erasing the audit hook's records through the policy channel")
    logdir = A.shared_dir(owner=A.NOBODY if A.RUN_AS == "nobody" else None)
    reported, logged, d1 = one_run(judge, "control", logdir)
    if not BLOCKS <= reported or not BLOCKS <= logged:
        judge.misbehaved(f"control: the blocks were not reported as expected (result "
                         f"{sorted(reported)}, incident log {sorted(logged)})")
    reported, logged, d2 = one_run(judge, "erase", logdir)
    missing = BLOCKS - reported
    if missing:
        judge.escape(f"the result's violations lost {sorted(w for _, w in missing)}")
    missing = BLOCKS - logged
    if missing:
        judge.escape(f"the incident log lost {sorted(w for _, w in missing)}")
    judge.done(d1 + "\n" + d2)


if __name__ == "__main__":
    A.main(test)
