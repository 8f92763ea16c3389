#!/usr/bin/python3
"""Memory bomb: allocate and touch far more memory than --memory allows.

Run with --memory 128MiB. The script appends 16 MiB blocks of touched memory (up to 1 GiB),
then maps and touches 512 MiB anonymous memory with mmap, then holds what it got. Judged from
the host: the run's resident memory (the sum of its processes' proportional shares, Pss, sampled
every 20 ms, plus the kernel's high-water mark VmHWM while held) stays within the limit plus a
small slack, and the script either got an
error (MemoryError) or was killed for it, never hung. The peak must also reach half the limit
at least: a bomb that did not push tested nothing, and fails.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

LIMIT_MIB = 128
SLACK_MIB = 16
# In a sanitizer build the sandbox's init is a fork of the instrumented pysandbox, whose shadow
# memory and allocator are resident: more of the run's RSS that is not the script's.
if os.environ.get("PYSANDBOX_SANITIZED"):
    SLACK_MIB += 32

SCRIPT = r'''
import mmap
blocks = []
try:
    for i in range(64):
        blocks.append(b"\x01" * (16 << 20))
    note("allocate 1 GiB", "ok: all of it")
except MemoryError:
    note("allocate 1 GiB", "MemoryError after %d MiB" % (16 * len(blocks)))
try:
    m = mmap.mmap(-1, 512 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for off in range(0, len(m), 4096):
        m[off] = 1
    note("mmap 512 MiB", "ok: touched")
except (OSError, MemoryError) as e:
    note("mmap 512 MiB", repr(e))
note("done", 0)
hold()
'''


def test():
    judge = A.Judge(f"memory bomb under --memory {LIMIT_MIB}MiB")
    # Pss, not VmRSS: through batch and MCP the sandbox's init is a fork of the front, whose heap
    # it maps copy-on-write without having allocated it (support.fronts.Sampler).
    with A.Sandbox(SCRIPT, options=["--memory", f"{LIMIT_MIB}MiB"], proportional=True) as sb:
        reached = sb.wait_ready()
        if reached:
            sb.sampler.sample()
            if A.VIA == "gvisor":
                # The script's memory is gVisor's memory file, runsc's on the host.
                hwm = sb.gvisor_memory_kib()
            else:
                hwm = int(sb.python().status.get("VmHWM", "0 kB").split()[0])
            sb.sampler.peak_hwm_kib = max(sb.sampler.peak_hwm_kib, hwm)
    o = A.check_behaved(judge, sb, allowed=(0, 1, A.signalled(9)))
    peak = max(sb.sampler.peak_rss_kib, sb.sampler.peak_hwm_kib) // 1024
    judge.check(peak <= LIMIT_MIB + SLACK_MIB,
                f"the run's resident memory reached {peak} MiB under --memory {LIMIT_MIB}MiB")
    # Nothing refuses plain allocation: the bomb must have pushed to at least half the limit.
    A.check_bomb_went_off(judge, o, reached, peak, LIMIT_MIB, None)
    judge.done(o.describe() + f"\npeak resident {peak} MiB")


if __name__ == "__main__":
    A.main(test)
