#!/usr/bin/python3
"""bpf(): create maps and load programs (eBPF verifier and JIT are kernel attack surface).

The script tries BPF_MAP_CREATE (array map) and BPF_PROG_LOAD (a two-instruction socket
filter: r0 = 0; exit). Contained when, judged from the host while the run is held, no process
of the run holds a bpf map/program fd, the script got neither, and the seccomp filter denies
bpf().
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import struct
attr = ctypes.create_string_buffer(struct.pack("=IIII", 2, 4, 4, 1), 128)   # ARRAY, 4, 4, 1
note("bpf(BPF_MAP_CREATE)", syscall(321, 0, attr, 128))
insns = ctypes.create_string_buffer(bytes.fromhex("b700000000000000" "9500000000000000"))
license = ctypes.create_string_buffer(b"GPL")
attr = ctypes.create_string_buffer(128)
# prog_type SOCKET_FILTER (1), insn_cnt 2, insns, license
struct.pack_into("=IIQQ", attr, 0, 1, 2, ctypes.addressof(insns), ctypes.addressof(license))
note("bpf(BPF_PROG_LOAD)", syscall(321, 5, attr, 128))
note("done", 0)
hold()
'''

if __name__ == "__main__":
    A.main(lambda: A.syscall_attack(
        "bpf() maps and programs", SCRIPT,
        fd_patterns={"bpf": r"anon_inode:bpf"},
        escape_prefixes=["bpf("],
        filter_cases=[("bpf(BPF_MAP_CREATE)", 321, A.AUDIT_ARCH_X86_64, (0,)),
                      ("bpf(BPF_PROG_LOAD)", 321, A.AUDIT_ARCH_X86_64, (5,))]))
