#!/usr/bin/python3
"""Write into the sandbox init's memory through /proc/1/mem (hijack PID 1).

The sandbox's init holds the report channel to the supervisor and outlives the script; code
that can write its memory can forge the result or hijack it. The script writes a token into
every writable mapping of init it can find (/proc/1/maps + /proc/1/mem at the start of each
rw mapping, where nothing live is likely to sit) and also tries /proc/1/task/1/mem. The token
is the reverse of an argument, so it is not already in init's memory (init carries the
supervisor's argv). Judged from the host: the host reads init's memory itself and looks for
the token while the run is held open.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os
token = ARGS[0][::-1].encode()
for path in ("/proc/1/mem", "/proc/1/task/1/mem"):
    maps = attempt("read /proc/1/maps", lambda: open("/proc/1/maps").read())
    fd = attempt("open %s O_RDWR" % path, os.open, path, os.O_RDWR)
    if not isinstance(maps, str) or not isinstance(fd, int):
        continue
    for line in maps.splitlines():
        addr, perms = line.split()[:2]
        if "w" not in perms:
            continue
        lo = int(addr.split("-")[0], 16)
        attempt("pwrite %s %#x" % (path, lo), os.pwrite, fd, token, lo)
    os.close(fd)
note("done", 0)
hold()
'''


def find_in_memory(pid: int, needle: bytes) -> list[str]:
    hits = []
    try:
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        with open(f"/proc/{pid}/mem", "rb") as mem:
            for line in maps:
                addr, perms = line.split()[:2]
                lo, hi = (int(x, 16) for x in addr.split("-"))
                if "r" not in perms or hi - lo > (256 << 20):
                    continue
                try:
                    mem.seek(lo)
                    if needle in mem.read(hi - lo):
                        hits.append(line)
                except OSError:
                    continue
    except OSError as e:
        raise A.Verdict(f"the host cannot read init's memory: {e}")
    return hits


def test():
    judge = A.Judge("write the sandbox init's memory via /proc/1/mem")
    arg = A.new_secret("INJECT")
    token = arg[::-1].encode()
    # The host reads all of init's memory while the run holds; the wall-clock limit must not end
    # the run first (an instrumented init of a sanitizer build has far more of it).
    with A.Sandbox(SCRIPT, [arg], timeout="60s") as sb:
        if sb.wait_ready():
            init = sb.init()
            hits = find_in_memory(init.pid, token)
            judge.check(not hits, f"the script's token is in init's memory at {hits[:3]}")
        else:
            judge.misbehaved("the script never reached the hold point")
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    if o.succeeded("pwrite"):
        judge.escape("the script wrote init's memory: " + ", ".join(o.succeeded("pwrite")[:3]))
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
