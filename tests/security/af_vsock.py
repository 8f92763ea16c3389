#!/usr/bin/python3
"""Reach the hypervisor or other VMs over AF_VSOCK (no network namespace covers it).

vsock is not namespaced: a socket made inside the sandbox talks to the host/hypervisor (CID 2)
or, on a VM with loopback transport, to the VM's own listeners. The host listens on a vsock
port when the kernel lets it. The script creates AF_VSOCK stream and datagram sockets,
connects to CIDs 1, 2 and the local CID on that port, binds and listens, and keeps whatever it
got open. Contained when, judged from the host while the run is held, no process of the run
holds any socket other than AF_UNIX, the host vsock listener saw nothing, and the seccomp
filter denies socket(AF_VSOCK).
"""
import os
import select
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import socket
port = int(ARGS[0])
keep = []
for typ, tname in ((socket.SOCK_STREAM, "stream"), (socket.SOCK_DGRAM, "dgram"),
                   (socket.SOCK_SEQPACKET, "seqpacket")):
    s = attempt("socket(AF_VSOCK, %s)" % tname, socket.socket, 40, typ)
    if isinstance(s, socket.socket):
        keep.append(s)
        s.settimeout(1)
        for cid in (1, 2, 3, 0xFFFFFFFF):
            attempt("connect %s cid %d" % (tname, cid), s.connect, (cid, port))
s = attempt("socket(AF_VSOCK) for listen", socket.socket, 40, socket.SOCK_STREAM)
if isinstance(s, socket.socket):
    keep.append(s)
    attempt("bind any", s.bind, (0xFFFFFFFF, port + 1))
    attempt("listen", s.listen, 1)
fd = syscall(41, 40, 1, 0)
note("raw socket(40, 1, 0)", fd)
note("done", 0)
hold()
'''


def test():
    judge = A.Judge("AF_VSOCK sockets")
    listener = None
    port = 40000 + os.getpid() % 20000
    try:
        listener = socket.socket(40, socket.SOCK_STREAM)
        listener.bind((0xFFFFFFFF, port))
        listener.listen(4)
        listener.setblocking(False)
    except OSError:
        listener = None  # no vsock transport for listening here: the fd check still decides
    with A.Sandbox(SCRIPT, [port]) as sb:
        if sb.wait_ready():
            for p in sb.inside():
                for fd, fam in A.socket_families(p.pid).items():
                    if fam != "unix":
                        judge.escape(f"pid {p.inner_pid} holds a non-AF_UNIX socket (fd {fd}, "
                                     f"{fam})")
            A.check_filter_denies(judge, sb.filters(), [
                ("socket(AF_VSOCK, SOCK_STREAM)", 41, A.AUDIT_ARCH_X86_64, (40, 1, 0)),
                ("socket(AF_VSOCK, SOCK_DGRAM)", 41, A.AUDIT_ARCH_X86_64, (40, 2, 0))])
        else:
            judge.misbehaved("the script never reached the hold point")
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    if listener is not None and select.select([listener], [], [], 0.2)[0]:
        judge.escape("the host vsock listener got a connection")
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
