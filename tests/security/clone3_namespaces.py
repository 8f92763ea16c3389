#!/usr/bin/python3
"""clone3() with namespace flags: clone3 passes its flags in memory, where a seccomp filter
cannot look, so the only safe answer is to refuse clone3 as a whole (ENOSYS, so that libc
falls back to clone(), whose flags a filter can check).

The script calls clone3 with CLONE_NEWUSER|NEWNS|NEWPID|NEWNET, with CLONE_NEWUSER alone and
with no flags at all; a child, if one is ever created, sleeps. Judged from the host while the
run is held: no process of the run is outside the sandbox's namespaces, no child exists (the
default profile forbids them), and the filter answers clone3 with ERRNO(ENOSYS) (another
denial is contained but breaks glibc's fallback: reported as misbehaviour).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os, struct, time
def clone3(flags):
    args = ctypes.create_string_buffer(struct.pack("=11Q", flags, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0))
    r = syscall(435, args, 88)
    if r == 0:
        time.sleep(20)
        os._exit(0)
    return r
note("clone3 NEWUSER|NEWNS|NEWPID|NEWNET", clone3(0x10000000 | 0x20000 | 0x20000000 | 0x40000000))
note("clone3 NEWUSER", clone3(0x10000000))
note("clone3 no flags", clone3(0))
time.sleep(0.2)
note("done", 0)
hold()
'''


def at_hold(judge, sb):
    extra = [p for p in sb.inside() if p.inner_pid not in (1, 2)]
    if extra:
        judge.escape(f"clone3 created {len(extra)} process(es)")
    filters = sb.filters()
    if filters:
        ret = A.verdict(filters, 435, A.AUDIT_ARCH_X86_64, ())
        if A.denies(ret) and ret != (A.RET_ERRNO | 38):
            judge.misbehaved(f"clone3 is denied with {A.action_name(ret)}, not ERRNO(ENOSYS): "
                             f"glibc will not fall back to clone() and threads break")


if __name__ == "__main__":
    A.main(lambda: A.syscall_attack(
        "clone3 with namespace flags", SCRIPT,
        escape_prefixes=["clone3"],
        at_hold=at_hold,
        filter_cases=[("clone3", 435, A.AUDIT_ARCH_X86_64, ())]))
