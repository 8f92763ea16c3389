#!/usr/bin/python3
"""io_uring: set up a ring (a large, often-exploited kernel surface that bypasses per-syscall
filtering once a ring exists).

The script calls io_uring_setup (and, if it got a ring, submits nothing but keeps it), plus
io_uring_enter / io_uring_register on a bogus fd. Contained when, judged from the host while the
run is held, no process of the run holds an io_uring fd, the script got no ring, and the
seccomp filter denies io_uring_setup, io_uring_enter and io_uring_register.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
params = ctypes.create_string_buffer(120)
fd = syscall(425, 8, params)                  # io_uring_setup(8, &params)
note("io_uring_setup", fd)
note("io_uring_enter(-1)", syscall(426, 0xFFFFFFFF, 0, 0, 0, 0, 0))
note("io_uring_register(-1)", syscall(427, 0xFFFFFFFF, 0, 0, 0))
note("done", 0)
hold()
'''

if __name__ == "__main__":
    A.main(lambda: A.syscall_attack(
        "io_uring", SCRIPT,
        fd_patterns={"io_uring": r"io_uring"},
        escape_prefixes=["io_uring_setup"],
        filter_cases=[("io_uring_setup", 425, A.AUDIT_ARCH_X86_64, (8,)),
                      ("io_uring_enter", 426, A.AUDIT_ARCH_X86_64, (3,)),
                      ("io_uring_register", 427, A.AUDIT_ARCH_X86_64, (3,))]))
