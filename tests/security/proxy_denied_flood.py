#!/usr/bin/python3
"""Exhaust pysandbox through its bookkeeping of denied destinations.

The proxy remembers every destination it denied, to report it (violations in the --json
result, the incident log). A script that asks for a NEW destination each time (a fresh
253-character name, a fresh port) as fast as it can, for its whole run, makes that record grow
without bound: in the supervisor's memory, in the result, in the incident log line, and in the
time it takes to write them out after the wall-clock limit. The script runs eight threads that
each open proxy connections in a loop, alternating CONNECT and plain http:// requests to
never-repeated names under .invalid, until --timeout 3s ends it.

Contained when, measured from the host: the supervisor's resident memory (VmRSS, sampled from
/proc every 50 ms) grew by less than 32 MiB between the first second and the end (under a
sanitizer: stayed under 192 MiB); the --json result (pysandbox's stdout) is under 1 MiB, parses,
and still reports network violations (through a kernel, which prints no result: its
execute_reply's verdict, under 1 MiB too); each line of the --incident-log is under 1 MiB; and
pysandbox exited within timeout + 1.5 s.
"""
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

NO_GVISOR = (  # no gvisor variant (attack.py, PYSANDBOX_VIA)
    "an attack on the --net proxy, which `run --kernel gvisor` refuses (exit 125): gVisor's "
    "network is none or loopback"
)

TIMEOUT = 3.0
RSS_GROWTH_MIB = 32
# Under ASan the supervisor's resident memory first climbs to about 100 MiB whatever it does
# (the allocator's regions, its quarantine, the shadow of both), in under a second when the
# machine is quiet but over several seconds on a loaded one, so "growth after the first second"
# measures the sanitizer's warm-up there. A sanitizer build is judged by its peak instead.
SANITIZED = bool(os.environ.get("PYSANDBOX_SANITIZED"))
RSS_PEAK_MIB_SANITIZED = 192
MAX_BYTES = 1 << 20

SCRIPT = A.PROXY_CLIENT + r'''
import itertools, threading
counter = itertools.count()
pad = "x" * 57
threading.stack_size(256 << 10)

def name(i):
    # Four labels of up to 63 characters: 253 in all, the longest a name may be.
    head = "n%010d-%s" % (i, pad[:51])
    return "%s.%s.%s.%s.invalid" % (head, pad, pad + "yyyyyy", pad[:53])

def flood():
    while True:
        i = next(counter)
        host, port = name(i), 1 + i % 65535
        if i % 2:
            raw = "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host, port, host, port)
        else:
            raw = "GET http://%s:%d/%d HTTP/1.1\r\n\r\n" % (host, port, i)
        try:
            proxy_exchange(raw.encode(), timeout=2)
        except OSError:
            pass

for _ in range(8):
    threading.Thread(target=flood, daemon=True).start()
note("flooding", 0)
sys.stdout.flush()
threading.Event().wait()
'''


def test():
    judge = A.Judge("a flood of never-repeated denied destinations through the proxy")
    logdir = A.shared_dir(owner=A.NOBODY if A.RUN_AS == "nobody" else None)
    log = logdir / "incidents.jsonl"
    samples: list[tuple[float, int]] = []
    stop = threading.Event()
    sb = A.Sandbox(SCRIPT, options=["--allow", "allowed.invalid:443", *A.RESULT_OPTIONS,
                                    "--incident-log", str(log)],
                   timeout=f"{TIMEOUT:g}s", host_timeout=TIMEOUT + 30)

    def sample() -> None:
        pid = None
        while not stop.is_set():
            if pid is None:
                sup = sb.supervisor()
                pid = sup.pid if sup else None
            if pid is not None:
                st = A.status(pid)
                if not st:
                    return
                rss = int(st.get("VmRSS", "0 kB").split()[0] or 0)
                samples.append((time.monotonic() - sb.start_time, rss))
            stop.wait(0.05)

    sb.start()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    o = sb.finish()
    stop.set()
    sampler.join()
    A.check_behaved(judge, sb, allowed=(A.TIMEOUT,))
    bound = TIMEOUT + 1.5 * A.TIME_SLACK_SCALE
    if o.elapsed > bound:
        judge.escape(f"pysandbox took {o.elapsed:.1f}s to end a {TIMEOUT:g}s run "
                     f"(bound {bound:.1f}s)")
    early = [rss for t, rss in samples if t >= 1.0]
    if not early:
        judge.misbehaved(f"no memory sample of the supervisor after the first second "
                         f"({len(samples)} samples)")
    else:
        growth = (max(early) - early[0]) / 1024
        if SANITIZED:
            judge.check(max(early) / 1024 < RSS_PEAK_MIB_SANITIZED,
                        f"the supervisor's resident memory reached {max(early) // 1024} MiB "
                        f"under a sanitizer (bound {RSS_PEAK_MIB_SANITIZED} MiB)")
        else:
            judge.check(growth < RSS_GROWTH_MIB,
                        f"the supervisor's resident memory grew by {growth:.1f} MiB after the "
                        f"first second ({early[0] // 1024} -> {max(early) // 1024} MiB)")
    total = sb._readers[0].total if A.VIA != "kernel" else len(json.dumps(o.cell or {}))
    if total >= MAX_BYTES:
        judge.escape(f"the --json result is {total / (1 << 20):.1f} MiB")
    else:
        r = A.check_verdict(judge, o)
        if r and o.note("flooding") is None:
            judge.misbehaved("the script never started flooding")
        if r and not any(isinstance(v, dict) and v.get("kind") == "network"
                         for v in r.get("violations") or []):
            judge.misbehaved("the result reports no network violation at all")
    lines = (A.read_bytes(str(log)) or b"").splitlines()
    if not lines:
        judge.misbehaved("nothing was written to the incident log")
    for line in lines:
        if len(line) >= MAX_BYTES:
            judge.escape(f"an incident log line is {len(line) / (1 << 20):.1f} MiB")
    judge.done(f"exit {o.rc}, {o.elapsed:.2f}s, result {total} bytes, incident lines "
               f"{[len(x) for x in lines]}, rss samples (s, KiB) {samples[::10]}\n"
               f"stderr: {o.stderr[-2000:]!r}\nstdout head: {o.stdout[:1500]!r}")


if __name__ == "__main__":
    A.main(test)
