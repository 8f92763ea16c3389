#!/usr/bin/python3
"""Outlast the wall-clock limit with artifacts that cost nothing to make and much to collect.

After the run pysandbox walks /tmp/work, hashing every artifact (and copying it with
--output-dir). A sparse file takes no space and no time to create, but reads as its full
apparent size: 10,000 files of 400 KiB made with truncate() are 4 GB to read, hash and copy,
which the script gets for free while the caller waits past the limit it set. The script makes
them in /tmp/work and then waits; --timeout 2s ends it. Run twice: with --json, and with
--json --output-dir DIR (an empty directory on a tmpfs of the test, so a copy cannot fill the
host's disk). Through a kernel, which has no --output-dir, the first run only, judged on the
verdict its execute_reply carries.

Contained when, both times, pysandbox exits within 3 s of its start (host wall time; times 4 in
a sanitizer build), with status "timeout", and the result reports how long the collection took:
usage.collect_ms, an integer.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

BOUND = 3.0 * A.TIME_SLACK_SCALE

SCRIPT = r'''
import os, time
for i in range(10000):
    with open("/tmp/work/sparse-%05d.bin" % i, "wb") as f:
        f.truncate(400 << 10)
note("created", 10000)
sys.stdout.flush()
time.sleep(60)
'''


def one_run(judge: A.Judge, label: str, options) -> str:
    sb = A.Sandbox(SCRIPT, options=[*A.RESULT_OPTIONS, *options], timeout="2s",
                   host_timeout=BOUND + 5)
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(A.TIMEOUT,))
    if o.elapsed > BOUND:
        judge.escape(f"{label}: pysandbox ended {o.elapsed:.1f}s after its start under "
                     f"--timeout 2s (bound {BOUND:.0f}s)")
    r = A.check_verdict(judge, o)
    if r:
        if o.note("created") is None:
            judge.misbehaved(f"{label}: the script did not create its files within 2s")
        if r.get("status") != "timeout":
            judge.misbehaved(f"{label}: status {r.get('status')!r}, not 'timeout'")
        usage = r.get("usage") or {}
        collect = usage.get("collect_ms") if isinstance(usage, dict) else None
        if not isinstance(collect, int) or isinstance(collect, bool):
            judge.escape(f"{label}: the result has no integer usage.collect_ms ({collect!r})")
    return f"=== {label}: exit {o.rc}, {o.elapsed:.2f}s\n{o.stdout[:600]!r}\n{o.stderr[-600:]!r}"


def test():
    judge = A.Judge("10,000 sparse 400 KiB artifacts under --timeout 2s")
    diagnostics = [one_run(judge, "--json", [])]
    if A.VIA == "kernel":  # no --output-dir: the first run only, its verdict the reply's
        judge.done("\n".join(diagnostics))
    owner = A.NOBODY if A.RUN_AS == "nobody" else 0
    fs = A.mount_tmpfs("300m")
    out = fs / "out"
    out.mkdir()
    os.chown(out, owner, owner)
    diagnostics.append(one_run(judge, "--json --output-dir", ["--output-dir", str(out)]))
    judge.done("\n".join(diagnostics))


if __name__ == "__main__":
    A.main(test)
