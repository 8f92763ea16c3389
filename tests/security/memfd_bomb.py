#!/usr/bin/python3
"""Memory bomb that RLIMIT_AS does not see: memfd/shmem pages written, never mapped.

Run with --memory 128MiB. The script creates memfds and write()s 1 GiB into them without
mapping them (so the address-space limit never counts them), then holds. Judged from the
host while the run is held: the shmem the run's processes hold through memfd descriptors
(st_blocks of each memfd, read through /proc/PID/fd) stays within the memory limit plus slack.
Only a memory cgroup (memory.max) charges these pages; rlimits cannot, so without a cgroup the
default profile's seccomp filter refusing memfd_create is the containment, and pysandbox's report
of that refusal (stderr) must be there. A bomb that neither filled half the limit nor was refused
tested nothing, and fails (attack.check_bomb_went_off).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

LIMIT_MIB = 128
SLACK_MIB = 16

SCRIPT = r'''
import os
fds = []
total = 0
chunk = b"\x01" * (4 << 20)
try:
    # 15 x 4 MiB per memfd stays under the file-size rlimit; 16 of them make 960 MiB.
    for i in range(16):
        fd = os.memfd_create("bomb%d" % i)
        fds.append(fd)
        for _ in range(15):
            os.write(fd, chunk)
            total += len(chunk)
    note("memfd 960 MiB", "ok: %d MiB" % (total >> 20))
except OSError as e:
    note("memfd 960 MiB", "%s after %d MiB" % (errno.errorcode.get(e.errno, e.errno), total >> 20))
note("done", 0)
hold()
'''


def test():
    judge = A.Judge(f"memfd (shmem) memory bomb under --memory {LIMIT_MIB}MiB")
    held_mib = 0
    with A.Sandbox(SCRIPT, options=["--memory", f"{LIMIT_MIB}MiB"], timeout="8s") as sb:
        reached = sb.wait_ready()
        if reached and A.VIA == "gvisor":
            # The script's memfds are gVisor's, in its memory file: runsc's on the host.
            held_mib = sb.gvisor_memory_kib() >> 10
        elif reached:
            for p in sb.inside():
                for fd, target in A.fd_targets(p.pid).items():
                    if target.startswith("/memfd:"):
                        try:
                            held_mib += os.stat(f"/proc/{p.pid}/fd/{fd}").st_blocks * 512 >> 20
                        except OSError:
                            pass
    o = A.check_behaved(judge, sb, allowed=(0, 1, A.signalled(9)))
    # Where seccomp refuses memfd_create (the default, without a memory cgroup) that is the
    # containment, and pysandbox says so; otherwise the bomb must have filled memfds.
    A.check_bomb_went_off(judge, o, reached, held_mib, LIMIT_MIB, "memfd_create",
                          "memfd 960 MiB")
    judge.check(held_mib <= LIMIT_MIB + SLACK_MIB,
                f"the run held {held_mib} MiB of memfd memory under --memory {LIMIT_MIB}MiB")
    judge.done(o.describe() + f"\nmemfd memory held: {held_mib} MiB")


if __name__ == "__main__":
    A.main(test)
