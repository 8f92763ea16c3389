"""The seccomp filters the kernel holds for a process, read from the host, and what they do.

seccomp_filters() reads the classic-BPF programs with PTRACE_SECCOMP_GET_FILTER (host root);
verdict() runs them, as the kernel would, on one system call.
"""

from __future__ import annotations

import ctypes
import os
import struct

from support.procfs import libc

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_I386 = 0x40000003
X32_SYSCALL_BIT = 0x40000000

RET_KILL_PROCESS = 0x80000000
RET_KILL_THREAD = 0x00000000
RET_TRAP = 0x00030000
RET_ERRNO = 0x00050000
RET_USER_NOTIF = 0x7FC00000
RET_TRACE = 0x7FF00000
RET_LOG = 0x7FFC0000
RET_ALLOW = 0x7FFF0000
_ACTION_NAMES = {RET_KILL_PROCESS: "KILL_PROCESS", RET_KILL_THREAD: "KILL_THREAD",
                 RET_TRAP: "TRAP", RET_ERRNO: "ERRNO", RET_USER_NOTIF: "USER_NOTIF",
                 RET_TRACE: "TRACE", RET_LOG: "LOG", RET_ALLOW: "ALLOW"}

libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
PTRACE_SECCOMP_GET_FILTER = 0x420C
WALL = 0x40000000


def _ptrace(req: int, pid: int, addr=0, data=None) -> int:
    ctypes.set_errno(0)
    r = libc.ptrace(req, pid, addr, data)
    if r == -1 and ctypes.get_errno():
        raise OSError(ctypes.get_errno(), f"ptrace({req:#x}, {pid}): "
                      + os.strerror(ctypes.get_errno()))
    return r


def seccomp_filters(pid: int) -> list[list[tuple[int, int, int, int]]]:
    """The classic-BPF seccomp programs the kernel holds for ``pid`` (newest first).

    Host root attaches with PTRACE_SEIZE, interrupts, reads every filter with
    PTRACE_SECCOMP_GET_FILTER and detaches; an empty list means no filter at all.
    """
    _ptrace(PTRACE_SEIZE, pid)
    try:
        _ptrace(PTRACE_INTERRUPT, pid)
        os.waitpid(pid, WALL)
        programs = []
        for index in range(64):
            try:
                count = _ptrace(PTRACE_SECCOMP_GET_FILTER, pid, index, None)
            except OSError as e:
                if e.errno in (2, 22):  # ENOENT: no more filters; EINVAL: not in filter mode
                    break
                raise
            buf = ctypes.create_string_buffer(count * 8)
            _ptrace(PTRACE_SECCOMP_GET_FILTER, pid, index, ctypes.cast(buf, ctypes.c_void_p))
            programs.append([struct.unpack_from("<HBBI", buf.raw, i * 8) for i in range(count)])
        return programs
    finally:
        try:
            _ptrace(PTRACE_DETACH, pid, 0, None)
        except OSError:
            pass


def run_bpf(program, data: bytes) -> int:
    """A classic-BPF interpreter, enough for seccomp filters (what the kernel accepts)."""
    A = X = 0
    mem = [0] * 16
    pc = 0
    M32 = 0xFFFFFFFF
    for _ in range(100000):
        code, jt, jf, k = program[pc]
        pc += 1
        cls = code & 0x07
        if cls == 0x00:  # LD
            mode = code & 0xE0
            if mode == 0x20:
                A = struct.unpack_from("<I", data, k)[0]
            elif mode == 0x00:
                A = k
            elif mode == 0x60:
                A = mem[k]
            elif mode == 0x80:
                A = len(data)
            else:
                raise ValueError(f"unsupported BPF load {code:#x}")
        elif cls == 0x01:  # LDX
            mode = code & 0xE0
            X = k if mode == 0x00 else mem[k] if mode == 0x60 else len(data) if mode == 0x80 \
                else None
            if X is None:
                raise ValueError(f"unsupported BPF ldx {code:#x}")
        elif cls == 0x02:
            mem[k] = A
        elif cls == 0x03:
            mem[k] = X
        elif cls == 0x04:  # ALU
            op = code & 0xF0
            src = X if code & 0x08 else k
            if op == 0x00: A = (A + src) & M32
            elif op == 0x10: A = (A - src) & M32
            elif op == 0x20: A = (A * src) & M32
            elif op == 0x30: A = A // src if src else 0
            elif op == 0x40: A |= src
            elif op == 0x50: A &= src
            elif op == 0x60: A = (A << src) & M32
            elif op == 0x70: A >>= src
            elif op == 0x80: A = (-A) & M32
            elif op == 0x90: A = A % src if src else 0
            elif op == 0xA0: A ^= src
            else: raise ValueError(f"unsupported BPF alu {code:#x}")
        elif cls == 0x05:  # JMP
            op = code & 0xF0
            src = X if code & 0x08 else k
            if op == 0x00:
                pc += k
                continue
            taken = {0x10: A == src, 0x20: A > src, 0x30: A >= src, 0x40: bool(A & src)}[op]
            pc += jt if taken else jf
        elif cls == 0x06:  # RET
            return (A if code & 0x18 == 0x10 else k) & M32
        elif cls == 0x07:
            if code & 0xF8 == 0x00: X = A
            else: A = X
    raise ValueError("BPF program did not return")


def seccomp_data(nr: int, arch: int = AUDIT_ARCH_X86_64, args=(), ip: int = 0x401000) -> bytes:
    a = [int(x) & 0xFFFFFFFFFFFFFFFF for x in args] + [0] * (6 - len(args))
    return struct.pack("<iIQ6Q", nr if nr < 2**31 else nr - 2**32, arch, ip, *a)


def _action(ret: int) -> int:
    return ret & 0xFFFF0000


def _signed(action: int) -> int:
    return action - 2**32 if action & 0x80000000 else action


def verdict(filters, nr: int, arch: int = AUDIT_ARCH_X86_64, args=()) -> int:
    """What the kernel would do for this syscall: the most restrictive action of all filters."""
    data = seccomp_data(nr, arch, args)
    result = RET_ALLOW
    for program in filters:
        ret = run_bpf(program, data)
        if _signed(_action(ret)) < _signed(_action(result)):
            result = ret
    return result


def action_name(ret: int) -> str:
    name = _ACTION_NAMES.get(_action(ret), hex(ret))
    return f"ERRNO({ret & 0xFFFF})" if _action(ret) == RET_ERRNO else name


def denies(ret: int) -> bool:
    """The call never reaches the kernel's implementation: ERRNO, kill, trap, TRACE with no
    tracer (ENOSYS), or USER_NOTIF: pysandbox's supervisor holds the listener and answers every
    notification with an error (never SECCOMP_USER_NOTIF_FLAG_CONTINUE). That last one holds
    only while no process of the run can answer for itself: Sandbox.filters() checks, from the
    host, that none of them holds the listener fd."""
    return _action(ret) in (RET_KILL_PROCESS, RET_KILL_THREAD, RET_TRAP, RET_ERRNO, RET_TRACE,
                            RET_USER_NOTIF)


class Filters(list):
    """A process's seccomp programs, with ``listener_holders``: the processes of its run that
    hold a seccomp notification listener (and so could answer their own denied calls)."""

    def __init__(self, programs):
        super().__init__(programs)
        self.listener_holders: list[str] = []
