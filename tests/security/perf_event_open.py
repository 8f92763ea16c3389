#!/usr/bin/python3
"""perf_event_open(): counters, samplers and tracepoints (side channels, kernel bugs).

With perf_event_paranoid <= 2 an unprivileged process may still count its own events. The
script opens a software CPU-clock counter on itself, a hardware cycles counter, and one with
the kernel included, and keeps what it gets. Contained when, judged from the host while the
run is held, no process of the run holds a perf_event fd, the script got none, and the seccomp
filter denies perf_event_open.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import struct
def attr(type_, config, exclude_kernel=True):
    a = ctypes.create_string_buffer(128)
    flags = (1 << 5) | (1 << 6) if exclude_kernel else 0     # exclude_kernel, exclude_hv
    struct.pack_into("=IIQQQQQ", a, 0, type_, 128, config, 0, 0, 0, flags)
    return a
for label, a in (("software cpu-clock", attr(1, 0)), ("hardware cycles", attr(0, 0)),
                 ("software with kernel", attr(1, 0, False))):
    note("perf_event_open " + label, syscall(298, a, 0, -1, -1, 0))
note("done", 0)
hold()
'''

if __name__ == "__main__":
    A.main(lambda: A.syscall_attack(
        "perf_event_open", SCRIPT,
        fd_patterns={"perf_event": r"perf_event"},
        escape_prefixes=["perf_event_open"],
        filter_cases=[("perf_event_open", 298, A.AUDIT_ARCH_X86_64, (0, 0, 0xFFFFFFFF))]))
