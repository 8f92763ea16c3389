#!/usr/bin/python3
"""New namespaces from inside: unshare(CLONE_NEWUSER...) and friends, setns, raw clone().

A nested user namespace hands the script every capability again (over its own new namespaces),
which reopens mount, network configuration and much of the kernel's attack surface. The
script tries unshare() with each CLONE_NEW* flag alone and NEWUSER|NEWNS together (and, if it
got a new user namespace, a tmpfs mount inside it), setns() into each of its own namespace
files, and a raw clone(CLONE_NEWUSER|SIGCHLD) whose child would sleep. Judged from the host
while the run is held: every process of the run is in the sandbox's namespaces (including
pid_for_children / time_for_children), and the seccomp filter denies unshare, setns and
clone with CLONE_NEW* flags (also when combined with CLONE_THREAD).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os, time
FLAGS = {"NEWUSER": 0x10000000, "NEWNS": 0x00020000, "NEWPID": 0x20000000,
         "NEWNET": 0x40000000, "NEWIPC": 0x08000000, "NEWUTS": 0x04000000,
         "NEWCGROUP": 0x02000000, "NEWTIME": 0x00000080}
for name, flag in FLAGS.items():
    note("unshare " + name, syscall(272, flag))
r = syscall(272, FLAGS["NEWUSER"] | FLAGS["NEWNS"])
note("unshare NEWUSER|NEWNS", r)
if r == 0:
    note("mount tmpfs in nested ns", syscall(165, b"none", b"/tmp", b"tmpfs", 0, None))
for ns in ("user", "mnt", "net", "ipc", "uts", "pid", "cgroup"):
    try:
        fd = os.open("/proc/1/ns/" + ns, os.O_RDONLY)
        note("setns " + ns, syscall(308, fd, 0))
    except OSError as e:
        note("setns " + ns, -e.errno)
r = syscall(56, FLAGS["NEWUSER"] | 17, 0, 0, 0, 0)      # clone(CLONE_NEWUSER|SIGCHLD)
if r == 0:
    time.sleep(20)
    os._exit(0)
note("clone NEWUSER", r)
time.sleep(0.2)
note("done", 0)
hold()
'''

THREAD = 0x00010000 | 0x00000100 | 0x00000800 | 0x00000200  # THREAD|VM|SIGHAND|FILES

if __name__ == "__main__":
    A.main(lambda: A.syscall_attack(
        "new namespaces (unshare, setns, clone CLONE_NEW*)", SCRIPT,
        escape_prefixes=["unshare", "clone NEWUSER", "mount tmpfs"],
        filter_cases=[("unshare(CLONE_NEWUSER)", 272, A.AUDIT_ARCH_X86_64, (0x10000000,)),
                      ("unshare(CLONE_NEWNS)", 272, A.AUDIT_ARCH_X86_64, (0x20000,)),
                      ("unshare(CLONE_NEWNET)", 272, A.AUDIT_ARCH_X86_64, (0x40000000,)),
                      ("setns", 308, A.AUDIT_ARCH_X86_64, (3, 0)),
                      ("clone(CLONE_NEWUSER|SIGCHLD)", 56, A.AUDIT_ARCH_X86_64,
                       (0x10000000 | 17,)),
                      ("clone(CLONE_THREAD|..|CLONE_NEWNET)", 56, A.AUDIT_ARCH_X86_64,
                       (THREAD | 0x40000000,)),
                      ("clone(CLONE_THREAD|..|CLONE_NEWNS)", 56, A.AUDIT_ARCH_X86_64,
                       (THREAD | 0x20000,))]))
