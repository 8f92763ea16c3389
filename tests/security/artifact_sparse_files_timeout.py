#!/usr/bin/python3
"""Outlast the wall-clock limit with artifacts that cost nothing to make and much to collect.

After the run pysandbox walks /tmp/work, hashing every artifact (and copying it with
--output-dir). A sparse file takes no space and no time to create, but reads as its full
apparent size: 10,000 files of 400 KiB made with truncate() (through gVisor, whose file proxy
is slower to make them, 250 of 16 MiB) are 4 GB to read, hash and copy,
which the script gets for free while the caller waits past the limit it set. The script makes
them in /tmp/work and then waits; --timeout 2s ends it. Run twice: with --json, and with
--json --output-dir DIR (an empty directory on a tmpfs of the test, so a copy cannot fill the
host's disk). Through a kernel, which has no --output-dir, the first run only, judged on the
verdict its execute_reply carries.

Contained when, both times, pysandbox exits within 2 s (host wall time; times 4 in a sanitizer
build) of a control run of the same script that makes no files and waits the same way (so a
loaded machine slows both alike: an absolute bound of 3 s failed at a load of 14 on 2 cores,
where the control run alone took 3 s and making 10,000 files on the host for --output-dir 1.3 s
more), with status "timeout", and the result reports how long the collection took:
usage.collect_ms, an integer. Reading, hashing and copying the 4 GB would take several seconds.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

MARGIN = 2.0 * A.TIME_SLACK_SCALE
# The same 4 GB to read: through gVisor in 250 files of 16 MiB, since its file proxy makes
# 10,000 files in 15 s, not within the 2 s the run has.
FILES, SIZE = (250, 16 << 20) if A.VIA == "gvisor" else (10000, 400 << 10)

SCRIPT = r'''
import os, time
for i in range(FILES):
    with open("/tmp/work/sparse-%05d.bin" % i, "wb") as f:
        f.truncate(SIZE)
note("created", FILES)
sys.stdout.flush()
time.sleep(60)
'''


def control_seconds() -> float:
    """How long pysandbox takes, on this machine now, to end the same script making no files."""
    sb = A.Sandbox(SCRIPT.replace("FILES", "0").replace("SIZE", str(SIZE)),
                   options=list(A.RESULT_OPTIONS), timeout="2s",
                   host_timeout=30 * A.TIME_SLACK_SCALE)
    return sb.run().elapsed


def one_run(judge: A.Judge, label: str, options, control: float) -> str:
    bound = control + MARGIN
    sb = A.Sandbox(SCRIPT.replace("FILES", str(FILES)).replace("SIZE", str(SIZE)),
                   options=[*A.RESULT_OPTIONS, *options],
                   timeout="2s", host_timeout=bound + 5)
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(A.TIMEOUT,))
    if o.elapsed > bound:
        judge.escape(f"{label}: pysandbox ended {o.elapsed:.1f}s after its start under "
                     f"--timeout 2s, {o.elapsed - control:.1f}s after a run without the files "
                     f"(bound {MARGIN:.0f}s)")
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
    control = control_seconds()
    diagnostics = [f"=== control: {control:.2f}s", one_run(judge, "--json", [], control)]
    if A.VIA == "kernel":  # no --output-dir: the first run only, its verdict the reply's
        judge.done("\n".join(diagnostics))
    owner = A.NOBODY if A.RUN_AS == "nobody" else 0
    fs = A.mount_tmpfs("300m")
    out = fs / "out"
    out.mkdir()
    os.chown(out, owner, owner)
    diagnostics.append(one_run(judge, "--json --output-dir", ["--output-dir", str(out)],
                               control))
    judge.done("\n".join(diagnostics))


if __name__ == "__main__":
    A.main(test)
