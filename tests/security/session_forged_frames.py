#!/usr/bin/python3
"""Forge a session's framing from inside a cell: its result lines and the driver's channel.

A session's cell shares its process with the cell driver, so it can write whatever it likes on
stdout, stderr and the driver's channel to the supervisor (fd 5, SOCK_SEQPACKET records). Cells,
one request each:

1. ``x = 41``.
2. The forger: makes a system call the sandbox denies (mount); prints result lines of its own
   (schema, status "ok", the next request's id and cell number) on stdout and stderr, through
   print and os.write; writes records on the driver's channel: "done" messages with a made-up
   token and without one, "ready", messages that are no JSON object, out of order, a record
   with no header, a message begun and never finished; and two messages shaped to multiply in
   the supervisor's memory once parsed (24 MiB of empty arrays; 24 MiB of "["). Its last
   expression is "REAL".
3. ``x + 1``.
4. The thief: takes its own cell's token from the driver's frame and sends a "done" of its own
   for it (its own fields are its word), then ends normally: the driver's "done" follows.
5. ``x + 2``.

Judged from the host: the session wrote exactly one line per request, each with its request's
id and cell number, and exited 0 (check_behaved); no cell lost the state or restarted the
sandbox; cell 2 is "ok" with value 'REAL' (no forged "done" was taken for it), its violations
name mount (the supervisor's evidence stands), and the supervisor reports dropped messages (so
the forged records reached it); the supervisor's peak resident memory grew by at most 64 MiB
over cell 2 (it was sent 48 MiB, never more than 24 at once: it may hold a message, not
multiply it); cells 3 and 5 answer 42 and 43 with status "ok", no violations and no output.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SESSION_ONLY = True

GROWTH_MIB = 64 * (2 if os.environ.get("PYSANDBOX_SANITIZED") else 1)

FORGER = r'''
import json, os, sys
note("mount", syscall(165, b"none", b"/tmp", b"tmpfs", 0, 0))
fake = json.dumps({"schema": "pysandbox.result/v1", "version": "0.1.0", "id": NEXT_ID,
                   "cell": 3, "sandbox": 1, "state": "kept", "status": "ok", "exit_code": 0,
                   "pysandbox_exit_code": 0, "value": "'FORGED'", "stdout": "", "stderr": "",
                   "violations": [], "warnings": []})
print(fake)
print(fake, file=sys.stderr)
os.write(1, ("\n" + fake + "\n").encode())
os.write(2, ("\n" + fake + "\n").encode())
fd = min(DRIVER_FDS)
STEP = 64 * 1024 - 9

def record(data):
    try:
        os.write(fd, data)
        return 0
    except OSError as e:
        return -e.errno

def message(text):
    parts = [text[i:i + STEP] for i in range(0, len(text), STEP)] or [b""]
    for i, part in enumerate(parts):
        r = record((b"." if i == len(parts) - 1 else b"+") + b"%08x" % i + part)
        if r:
            return r
    return 0

forged = {
    "done, made-up token": json.dumps({"kind": "done", "token": "0" * 32, "outcome": "ok",
                                       "value": "'FORGED'"}),
    "done, no token": json.dumps({"kind": "done", "outcome": "exit", "exit_code": 0,
                                  "value": "'FORGED'"}),
    "done, null token": json.dumps({"kind": "done", "token": None, "value": "'FORGED'"}),
    "ready": json.dumps({"kind": "ready", "failed": {}}),
    "array": "[1, 2]",
    "not json": "{not json",
}
for what, text in forged.items():
    note("record " + what, message(text.encode()))
note("record out of order", record(b".00000007{}"))
note("record without header", record(b"garbage"))
note("record begun, never finished", record(b'+00000000{"kind":"done","token":"'))
many = b'{"kind":"done","many":[' + b"[]," * (8 << 20) + b"[]]}"
note("24 MiB of empty arrays", message(many))
del many
deep = b"[" * (24 << 20)
note("24 MiB of [", message(deep))
del deep
"REAL"
'''

THIEF = r'''
import json, os, sys
token = None
frame = sys._getframe()
while frame is not None and token is None:
    m = frame.f_locals.get("message")
    if isinstance(m, dict) and isinstance(m.get("token"), str):
        token = m["token"]
    frame = frame.f_back
note("token", "ok" if token else "not found")
if token:
    text = json.dumps({"kind": "done", "token": token, "outcome": "ok", "value": "'STOLEN'"})
    os.write(min(DRIVER_FDS), b".00000000" + text.encode())
"REAL-4"
'''


def peak_kib(pid: int) -> int:
    return int(A.status(pid).get("VmHWM", "0 kB").split()[0] or 0)


def test():
    judge = A.Judge("forged result lines and driver records from a session's cell")
    sb = A.SessionSandbox(timeout="20s", host_timeout=90)
    with sb:
        first = sb.ask("x = 41")
        before = peak_kib(sb.proc.pid)
        forger = sb.ask(FORGER.replace("NEXT_ID", json.dumps(f"{sb.marker}-3")))
        grown = (peak_kib(sb.proc.pid) - before) / 1024
        third = sb.ask("x + 1")
        thief = sb.ask(THIEF)
        fifth = sb.ask("x + 2")
    o = A.check_behaved(judge, sb, allowed=(0,))
    results = [first, forger, third, thief, fifth]
    for i, r in enumerate(results, 1):
        if r is None:
            judge.misbehaved(f"cell {i} got no result")
        elif r.get("state") != "kept" or r.get("sandbox") != 1:
            judge.escape(f"cell {i}: state {r.get('state')!r}, sandbox {r.get('sandbox')!r}: "
                         "the session did not keep its one sandbox")
    if forger:
        if (forger.get("status"), forger.get("value")) != ("ok", "'REAL'"):
            judge.escape(f"the forger's result is {forger.get('status')!r} with value "
                         f"{forger.get('value')!r}, not ok with 'REAL': a forged record was "
                         "taken for it")
        if not any(v.get("kind") == "syscall" and v.get("what") == "mount"
                   for v in forger.get("violations") or [] if isinstance(v, dict)):
            judge.escape(f"the forger's violations lost its denied mount: "
                         f"{forger.get('violations')!r}")
        if not any("malformed messages on the driver's channel were dropped" in str(w)
                   for w in forger.get("warnings") or []):
            judge.misbehaved("the supervisor reports no dropped message: the forged records "
                             "never reached it, nothing was tested")
        judge.check(grown <= GROWTH_MIB,
                    f"the supervisor's peak resident memory grew by {grown:.0f} MiB while it "
                    f"read the forger's messages (at most {GROWTH_MIB} MiB)")
    for i, r, want in ((3, third, "42"), (5, fifth, "43")):
        if r is None:
            continue
        got = (r.get("status"), r.get("value"), r.get("violations"), r.get("stdout"),
               r.get("stderr"))
        if got != ("ok", want, [], "", ""):
            judge.escape(f"cell {i} (x + {i // 2}) is not its own: status, value, violations, "
                         f"stdout, stderr = {got!r}")
    judge.done(o.describe() + f"\nsupervisor peak grew {grown:.0f} MiB\n"
               + "\n".join(json.dumps(r)[:1500] for r in results))


if __name__ == "__main__":
    A.main(test)
