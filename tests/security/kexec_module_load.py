#!/usr/bin/python3
"""Replace or extend the running kernel: kexec_load, kexec_file_load, init_module,
finit_module, delete_module, and module autoloading through exotic socket families.

The kernel under test may not even support modules or kexec (then these calls fail whatever
the sandbox does), so the verdict rests first on the seccomp filter the kernel holds for the
script, read and evaluated by the host: all five calls must be denied. From the host it also
checks that the loaded-module list and kexec state did not change. The module image handed to
init_module is garbage; the kexec segments are empty.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import glob, os, socket
note("kexec_load", syscall(246, 0, 0, None, 0))
fd = os.open("/usr/bin/python3", os.O_RDONLY)
note("kexec_file_load", syscall(320, fd, fd, 0, b"", 0))
image = ctypes.create_string_buffer(b"\x7fELF" + b"\0" * 252)
note("init_module", syscall(175, image, 256, b""))
kos = glob.glob("/lib/modules/*/kernel/**/*.ko*", recursive=True)
mfd = os.open(kos[0], os.O_RDONLY) if kos else fd
note("finit_module", syscall(313, mfd, b"", 0))
note("delete_module", syscall(176, b"loop", 0))
for fam in (3, 4, 5, 9, 12, 19, 21, 23, 24, 26, 29, 31, 33, 35, 36, 37, 41, 42, 43, 44):
    r = syscall(41, fam, 2, 0)
    note("socket family %d" % fam, r)
note("done", 0)
hold()
'''


def snapshot() -> tuple:
    def read(p):
        try:
            return open(p).read()
        except OSError:
            return None
    return read("/proc/modules"), read("/sys/kernel/kexec_loaded"), \
        read("/sys/kernel/kexec_crash_loaded")


if __name__ == "__main__":
    state = snapshot()

    def check_after(judge, sb, o):
        if snapshot() != state:
            judge.escape("the host's module list or kexec state changed")

    A.main(lambda: A.syscall_attack(
        "kexec and kernel module loading", SCRIPT,
        escape_prefixes=["kexec", "init_module", "finit_module", "delete_module"],
        after=check_after,
        filter_cases=[("kexec_load", 246, A.AUDIT_ARCH_X86_64, ()),
                      ("kexec_file_load", 320, A.AUDIT_ARCH_X86_64, ()),
                      ("init_module", 175, A.AUDIT_ARCH_X86_64, ()),
                      ("finit_module", 313, A.AUDIT_ARCH_X86_64, ()),
                      ("delete_module", 176, A.AUDIT_ARCH_X86_64, ())]))
