#!/usr/bin/python3
"""userfaultfd(): stall kernel accesses to user memory at will (a race-widening primitive).

UFFD_USER_MODE_ONLY is allowed to everyone even with vm.unprivileged_userfaultfd = 0. The
script calls userfaultfd() with and without it, tries /dev/userfaultfd, and performs
UFFDIO_API on whatever it got. Contained when, judged from the host while the run is held, no
process of the run holds a userfaultfd, the script got none, and the seccomp filter denies
userfaultfd.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import fcntl, os, struct
for flags, label in ((os.O_CLOEXEC | 1, "UFFD_USER_MODE_ONLY"), (os.O_CLOEXEC, "full")):
    fd = syscall(323, flags)
    note("userfaultfd " + label, fd)
    if fd >= 0:
        api = bytearray(struct.pack("=QQQ", 0xAA, 0, 0))
        attempt("UFFDIO_API " + label, fcntl.ioctl, fd, 0xC018AA3F, api)
fd = attempt("open /dev/userfaultfd", os.open, "/dev/userfaultfd", os.O_RDWR)
note("done", 0)
hold()
'''

if __name__ == "__main__":
    A.main(lambda: A.syscall_attack(
        "userfaultfd", SCRIPT,
        fd_patterns={"userfaultfd": r"userfaultfd"},
        escape_prefixes=["userfaultfd", "open /dev/userfaultfd"],
        filter_cases=[("userfaultfd(UFFD_USER_MODE_ONLY)", 323, A.AUDIT_ARCH_X86_64, (0x80001,)),
                      ("userfaultfd(0)", 323, A.AUDIT_ARCH_X86_64, (0,))]))
