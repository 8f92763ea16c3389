#!/usr/bin/python3
"""Fill the host's disk through --workdir: write past --tmp-size into the bound host directory.

/tmp is a tmpfs of --tmp-size; --workdir DIR replaces /tmp/work with a host directory, and
whatever bounds /tmp must bound it too, or a script fills the host filesystem DIR lives on. The
test mounts a 512 MiB tmpfs of its own on the host (so the measure is exact and nothing else
writes there), makes DIR inside it, and runs with --tmp-size 16MiB --workdir DIR. The script
writes 1 MiB chunks into one file after another (a file that hits the file-size limit, EFBIG,
just moves it to the next) until a write fails otherwise, or 96 MiB went in, then holds.

Contained when the host filesystem's used bytes (statvfs) grew by at most 16 MiB + 4 MiB of
slack, both at the hold and after the run, and the script was stopped by an error (ENOSPC,
EDQUOT, ...) rather than writing all 96 MiB.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

RUN_ONLY = (  # no session, batch or mcp variant (attack.py, PYSANDBOX_VIA)
    "--workdir: a session, a batch job or an MCP call has no host directory bound as"
    " /tmp/work; its /tmp is the tmpfs"
    " that fill_tmp attacks"
)

LIMIT_MIB = 16
SLACK_MIB = 4
ATTEMPT_MIB = 96

SCRIPT = r'''
import errno, os
chunk = b"\x02" * (1 << 20)
total = 0
stop = None
for i in range(1000):
    if total >= %d:
        break
    try:
        f = open("/tmp/work/fill-%%d.bin" %% i, "wb", buffering=0)
    except OSError as e:
        stop = e
        break
    try:
        while total < %d:
            f.write(chunk)
            total += 1
    except OSError as e:
        if e.errno != errno.EFBIG:
            stop = e
    finally:
        try:
            f.close()
        except OSError as e:
            stop = stop or e
    if stop:
        break
why = errno.errorcode.get(stop.errno, stop.errno) if stop else None
note("fill", "stopped by %%s after %%d MiB" %% (why, total) if stop
     else "ok: wrote all %%d MiB" %% total)
note("done", 0)
hold()
''' % (ATTEMPT_MIB, ATTEMPT_MIB)


def test():
    judge = A.Judge(f"fill a --workdir under --tmp-size {LIMIT_MIB}MiB")
    fs = A.mount_tmpfs("512m")
    workdir = fs / "workdir"
    workdir.mkdir(mode=0o755)
    os.chown(workdir, A.NOBODY, A.NOBODY)
    before = A.used_bytes(fs)
    bound = (LIMIT_MIB + SLACK_MIB) << 20
    with A.Sandbox(SCRIPT, options=["--tmp-size", f"{LIMIT_MIB}MiB", "--workdir", str(workdir)],
                   timeout="20s") as sb:
        if sb.wait_ready():
            grown = A.used_bytes(fs) - before
            judge.check(grown <= bound, f"during the run the host filesystem under --workdir "
                                        f"grew by {grown / (1 << 20):.1f} MiB")
        else:
            judge.misbehaved("the script never reached the hold point")
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    grown = A.used_bytes(fs) - before
    judge.check(grown <= bound, f"after the run the host filesystem under --workdir grew by "
                                f"{grown / (1 << 20):.1f} MiB")
    if str(o.note("fill")).startswith("ok"):
        judge.escape(f"the script wrote all {ATTEMPT_MIB} MiB into --workdir")
    judge.done(o.describe() + f"\nhost filesystem grew by {grown / (1 << 20):.1f} MiB")


if __name__ == "__main__":
    A.main(test)
