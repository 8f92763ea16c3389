#!/usr/bin/python3
"""The kernel surface a denylist forgets: modify_ldt, memfd_secret, and system calls newer than
the seccomp library that built the filter.

pysandbox's policy names the calls it denies; whatever it does not name is allowed, and a name
the library (libseccomp 2.5) does not know cannot even be named. So modify_ldt (154: segment
descriptors, a long history of kernel bugs), memfd_secret (447: memory removed from the
kernel's direct map, outside the accounting the sandbox relies on) and everything the kernel
added after the library (statmount 457, listmount 458, lsm_get_self_attr 459,
lsm_set_self_attr 460, lsm_list_modules 461, mseal 462, setxattrat 463, getxattrat 464,
listxattrat 465, removexattrat 466, open_tree_attr 467, file_getattr 468, file_setattr 469,
listns 470, and whatever comes next) reach the kernel's implementation. The script calls each
with zero arguments (harmless: the new ones fail on the NULL pointers, mseal of an empty range
and a modify_ldt read of 0 bytes succeed and change nothing), then holds.

Contained when the seccomp filter the kernel holds for the script, evaluated on the host,
denies 154, 447, every number from 457 to 600, 1000 and 4096 on x86_64 (calling a number the
kernel lacks returns ENOSYS either way, so only the filter proves anything for those), and none
of the calls succeeded in the script.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

X = A.AUDIT_ARCH_X86_64
NAMES = {154: "modify_ldt", 447: "memfd_secret", 457: "statmount", 458: "listmount",
         459: "lsm_get_self_attr", 460: "lsm_set_self_attr", 461: "lsm_list_modules",
         462: "mseal", 463: "setxattrat", 464: "getxattrat", 465: "listxattrat",
         466: "removexattrat", 467: "open_tree_attr", 468: "file_getattr", 469: "file_setattr",
         470: "listns"}
NUMBERS = [154, 447] + list(range(457, 601)) + [1000, 4096]
CASES = [(f"{NAMES.get(nr, 'nr')} ({nr})", nr, X, ()) for nr in NUMBERS]

SCRIPT = r'''
import json
for nr in json.loads(ARGS[0]):
    note("call %d" % nr, syscall(nr, 0, 0, 0, 0, 0, 0))
note("done", 0)
hold()
'''


def test():
    A.syscall_attack("modify_ldt, memfd_secret and system calls newer than libseccomp 2.5",
                     SCRIPT, args=[str(NUMBERS).replace(" ", "")], filter_cases=CASES,
                     escape_prefixes=["call "])


if __name__ == "__main__":
    A.main(test)
