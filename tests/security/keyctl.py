#!/usr/bin/python3
"""Kernel keyrings: read the caller's keys, plant keys in the caller's session keyring.

The session keyring is inherited across fork and exec and is not namespaced: unless the
sandbox cuts it off, the script "possesses" the caller's session keyring. The test runs
pysandbox inside a fresh session keyring that holds a "user" key with a secret payload. The
script lists and reads everything reachable from @s, @u, @us, @p, @t, searches for the key,
links a key of its own into the session keyring, and joins/creates keyrings. Contained when the
secret never appears, the caller's session keyring holds exactly what it held before, and the
seccomp filter denies keyctl, add_key and request_key.
"""
import ctypes
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import struct
libc.syscall.restype = ctypes.c_long
KEYCTL_GET_KEYRING_ID, KEYCTL_JOIN, KEYCTL_DESCRIBE, KEYCTL_SEARCH, KEYCTL_READ = 0, 1, 6, 10, 11
def read_key(serial):
    buf = ctypes.create_string_buffer(4096)
    n = syscall(250, KEYCTL_READ, serial, buf, 4096)
    return buf.raw[:n] if n >= 0 else n
seen = set()
for spec, name in ((-3, "@s"), (-4, "@u"), (-5, "@us"), (-2, "@p"), (-1, "@t")):
    ring = syscall(250, KEYCTL_GET_KEYRING_ID, spec, 0)
    note("get keyring %s" % name, ring)
    if ring < 0:
        continue
    content = read_key(ring)
    if isinstance(content, bytes):
        serials = struct.unpack("=%di" % (len(content) // 4), content)
        for s in serials:
            if s in seen:
                continue
            seen.add(s)
            d = ctypes.create_string_buffer(256)
            syscall(250, KEYCTL_DESCRIBE, s, d, 256)
            data = read_key(s)
            label = "read key %d (%s)" % (s, d.value.decode(errors="replace"))
            note(label, data if isinstance(data, int) else "ok: %r" % data)
found = syscall(250, KEYCTL_SEARCH, -3, b"user", ARGS[0].encode(), 0)
note("search caller key", found)
if found >= 0:
    note("read caller key", "ok: %r" % read_key(found))
planted = syscall(248, b"user", ("planted-" + MARKER).encode(), b"pwned", 5, -3)
note("add_key into @s", planted)
note("add_key into @u", syscall(248, b"user", ("planted-u-" + MARKER).encode(), b"x", 1, -4))
note("request_key", syscall(249, b"user", ARGS[0].encode(), 0, 0))
note("join new session keyring", syscall(250, KEYCTL_JOIN, 0))
note("done", 0)
'''

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def keyctl(*args) -> int:
    r = _libc.syscall(ctypes.c_long(250), *[ctypes.c_long(a) if isinstance(a, int) else a
                                            for a in args])
    if r < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return r


def keyring_content(serial: int) -> tuple:
    buf = ctypes.create_string_buffer(4096)
    n = keyctl(11, serial, buf, 4096)
    return struct.unpack(f"={n // 4}i", buf.raw[:n])


def test():
    judge = A.Judge("kernel keyrings (the caller's session keyring)")
    # A fresh anonymous session keyring for this process and everything it starts.
    session = keyctl(1, None)
    description = f"pysandbox-caller-key-{A.new_marker()[-12:]}"
    secret = A.new_secret()
    payload = secret.encode()
    _libc.syscall.argtypes = None
    key = _libc.syscall(ctypes.c_long(248), b"user", description.encode(), payload,
                        ctypes.c_long(len(payload)), ctypes.c_long(-3))
    if key < 0:
        raise A.Verdict("cannot add a key to the test's session keyring: "
                        f"errno {ctypes.get_errno()}")
    before = keyring_content(session)
    sb = A.Sandbox(SCRIPT, [description])
    sb.run()
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    A.check_secrets(judge, o, {"the caller's key payload": secret})
    after = keyring_content(session)
    if after != before:
        judge.escape(f"the caller's session keyring changed: {before} -> {after}")
    for what in ("add_key", "request_key", "search caller key", "read caller key"):
        ok = o.succeeded(what)
        if ok:
            judge.escape("the kernel let through: " + ", ".join(ok))
    # The filter: judged on a second, held run (the first one must not be held, to keep the
    # keyring state simple).
    with A.Sandbox("note('done', 0)\nhold()\n") as sb2:
        if sb2.wait_ready():
            A.check_filter_denies(judge, sb2.filters(), [
                ("keyctl", 250, A.AUDIT_ARCH_X86_64, (0, 0xFFFFFFFD)),
                ("add_key", 248, A.AUDIT_ARCH_X86_64, ()),
                ("request_key", 249, A.AUDIT_ARCH_X86_64, ())])
    A.check_behaved(judge, sb2, allowed=(0,))
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
