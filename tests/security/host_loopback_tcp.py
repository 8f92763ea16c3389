#!/usr/bin/python3
"""Reach host services over the network: 127.0.0.1, ::1 and the host's own address.

The host listens on TCP 127.0.0.1, TCP ::1 (when the host has IPv6) and TCP 0.0.0.0, and on UDP
127.0.0.1. The script connects to every one (and to the host's external address for the
0.0.0.0 listener) and sends datagrams, once with --net none and once with --net loopback
(loopback inside must still be the sandbox's own). Contained when no listener ever had a
connection queued or a datagram delivered, and (seccomp) the filter denies AF_INET/AF_INET6
sockets under --net none.
"""
import os
import select
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import socket
targets = [x.rsplit(":", 2) for x in ARGS[0].split(",")]
for kind, host, port in targets:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    if kind == "tcp":
        def go():
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.settimeout(1)
            s.connect((host, int(port)))
            s.sendall(b"PWNED " + MARKER.encode())
        attempt("connect tcp %s %s" % (host, port), go)
    else:
        def go():
            s = socket.socket(fam, socket.SOCK_DGRAM)
            return s.sendto(b"PWNED " + MARKER.encode(), (host, int(port)))
        attempt("sendto udp %s %s" % (host, port), go)
note("done", 0)
hold()
'''


def external_address() -> str | None:
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect(("192.0.2.1", 9))  # no packet is sent
        addr = s.getsockname()[0]
        s.close()
        return None if addr.startswith("127.") else addr
    except OSError:
        return None


def test():
    judge = A.Judge("host loopback / host address TCP and UDP listeners")
    listeners = []
    targets = []

    def listen(fam, kind, addr):
        try:
            s = socket.socket(fam, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)
            s.bind((addr, 0))
        except OSError:
            return None
        if kind == "tcp":
            s.listen(16)
        s.setblocking(False)
        listeners.append((kind, addr, s))
        return s.getsockname()[1]

    p = listen(socket.AF_INET, "tcp", "127.0.0.1")
    targets.append(f"tcp:127.0.0.1:{p}")
    targets.append(f"tcp:localhost:{p}")
    p6 = listen(socket.AF_INET6, "tcp", "::1")
    if p6:
        targets.append(f"tcp:::1:{p6}")
    pany = listen(socket.AF_INET, "tcp", "0.0.0.0")
    targets.append(f"tcp:127.0.0.1:{pany}")
    ext = external_address()
    if ext:
        targets.append(f"tcp:{ext}:{pany}")
    pu = listen(socket.AF_INET, "udp", "127.0.0.1")
    targets.append(f"udp:127.0.0.1:{pu}")

    for net in ("none", "loopback"):
        with A.Sandbox(SCRIPT, [",".join(targets)], options=["--net", net]) as sb:
            held = sb.wait_ready()
            if held and net == "none":
                A.check_filter_denies(judge, sb.filters(), [
                    ("socket(AF_INET) under --net none", 41, A.AUDIT_ARCH_X86_64, (2, 1, 0)),
                    ("socket(AF_INET6) under --net none", 41, A.AUDIT_ARCH_X86_64, (10, 2, 0))])
            elif not held:
                judge.misbehaved(f"--net {net}: the script never reached the hold point")
        o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
        for kind, addr, s in listeners:
            r, _, _ = select.select([s], [], [], 0.2)
            if r:
                if kind == "tcp":
                    conn, peer = s.accept()
                    data = conn.recv(100)
                    judge.escape(f"--net {net}: host TCP listener {addr} accepted {peer} {data!r}")
                    conn.close()
                else:
                    data, peer = s.recvfrom(100)
                    judge.escape(f"--net {net}: host UDP socket {addr} got {data!r} from {peer}")
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
