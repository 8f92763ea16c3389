#!/usr/bin/python3
"""The rest of the privileged syscall list: acct, swapon/swapoff, reboot, syslog, quotactl,
open_by_handle_at, clock and time setters, personality changes, and chroot.

Most of these need a capability the script lacks, so the kernel refuses them anyway; the
seccomp filter must refuse them first (defence in depth, and a named denial for the caller).
The host reads the kernel log as a secret (syslog would hand it over), evaluates the filter
the kernel holds for the script, and checks that the host clock did not jump. Arguments are
harmless even if a call got through: acct(NULL), swapoff of a missing file, reboot with a bad
magic, settimeofday/clock_settime to the current time, adjtimex read-only on the host side.
"""
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os, struct, time
note("acct(NULL)", syscall(163, None))
note("swapon", syscall(167, b"/tmp/work/swap", 0))
note("swapoff", syscall(168, b"/nonexistent", 0))
note("reboot(bad magic)", syscall(169, 0, 0, 0, None))
buf = ctypes.create_string_buffer(1 << 16)
n = syscall(103, 3, buf, 1 << 16)            # SYSLOG_ACTION_READ_ALL
note("syslog(READ_ALL)", n)
if n > 0:
    print("DMESG", buf.raw[:n], flush=True)
note("quotactl", syscall(179, 0x800002, b"/dev/null", 0, None))
fh = ctypes.create_string_buffer(struct.pack("=Ii", 8, 1) + struct.pack("=II", 2, 0))
note("open_by_handle_at", syscall(304, os.open("/usr", os.O_RDONLY), fh, 0))
now = time.time()
tv = ctypes.create_string_buffer(struct.pack("=qq", int(now), 0))
note("settimeofday(now)", syscall(164, tv, None))
ts = ctypes.create_string_buffer(struct.pack("=qq", int(now), 0))
note("clock_settime(now)", syscall(227, 0, ts))
tx = ctypes.create_string_buffer(208)
struct.pack_into("=I", tx, 0, 0x0001)       # ADJ_OFFSET with offset 0
note("adjtimex(ADJ_OFFSET)", syscall(159, tx))
note("clock_adjtime(ADJ_OFFSET)", syscall(305, 0, tx))
note("personality(READ_IMPLIES_EXEC)", syscall(135, 0x0400000))
note("personality(ADDR_NO_RANDOMIZE)", syscall(135, 0x0040000))
note("chroot", syscall(161, b"/tmp"))
note("done", 0)
hold()
'''

X = A.AUDIT_ARCH_X86_64
CASES = [("acct", 163, X, ()), ("swapon", 167, X, ()), ("swapoff", 168, X, ()),
         ("reboot", 169, X, ()), ("syslog(READ_ALL)", 103, X, (3,)), ("quotactl", 179, X, ()),
         ("open_by_handle_at", 304, X, ()), ("settimeofday", 164, X, ()),
         ("clock_settime", 227, X, (0,)), ("clock_adjtime", 305, X, (0,)),
         ("adjtimex", 159, X, ()), ("personality(READ_IMPLIES_EXEC)", 135, X, (0x0400000,)),
         ("personality(ADDR_NO_RANDOMIZE)", 135, X, (0x0040000,)), ("chroot", 161, X, ())]


def kernel_log_lines() -> dict:
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(1 << 16)
    n = libc.klogctl(3, buf, len(buf))
    lines = [l for l in buf.raw[:max(n, 0)].decode(errors="replace").splitlines() if len(l) > 40]
    return {f"kernel log line {i}": l for i, l in enumerate(lines[-5:])}


if __name__ == "__main__":
    secrets = kernel_log_lines()
    wall0, mono0 = time.time(), time.monotonic()

    def after(judge, sb, o):
        A.check_secrets(judge, o, secrets)
        drift = (time.time() - wall0) - (time.monotonic() - mono0)
        judge.check(abs(drift) < 1.0, f"the host clock jumped by {drift:.1f}s")

    A.main(lambda: A.syscall_attack(
        "acct, swap, reboot, syslog, quotactl, open_by_handle_at, clock setters, personality",
        SCRIPT,
        escape_prefixes=["acct", "swapon", "swapoff", "reboot", "syslog", "quotactl",
                         "open_by_handle_at", "settimeofday", "clock_settime", "adjtimex(",
                         "clock_adjtime", "chroot"],
        after=after, filter_cases=CASES))
