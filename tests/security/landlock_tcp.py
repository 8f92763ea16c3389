#!/usr/bin/python3
"""TCP that Landlock alone refuses: a connection past the proxy, and any listener of the script's.

Landlock (ABI 4) handles TCP bind and connect under --net none (neither at all) and --net proxy
(connections to the proxy's port 3128 only). To show that its rule holds, and not the layers in
front of it, the host takes those layers away: under --net none the profile's seccomp allows
socket() of any family (the standard filter allows AF_UNIX only) and the host brings the
sandbox's lo up. Then the host listens inside the sandbox's own network namespace, on
127.0.0.1:PORT, and the script connects there and binds and listens on 0.0.0.0, 127.0.0.1 (an
ephemeral port) and ::. Contained when the host's listener never had a connection queued and
the host sees no TCP listener in the sandbox's namespace but its own (and the proxy's).
Under --net loopback Landlock leaves TCP alone: it restricts ports, not addresses, and the
sandbox's network namespace is that mode's boundary.
"""
import json
import os
import random
import select
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

NO_GVISOR = (  # no gvisor variant (attack.py, PYSANDBOX_VIA)
    "an attack on Landlock's TCP rules, which a gVisor run does not use (runsc mounts; "
    "src/plan/gvisor.hpp), and half of it runs --net proxy, which gVisor refuses"
)

SCRIPT = r'''
import socket
port = int(ARGS[0])
hold("listener")
held = []
def connect():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(("127.0.0.1", port))
    s.sendall(b"PWNED " + MARKER.encode())
    held.append(s)
attempt("connect 127.0.0.1:%d" % port, connect)
for host, p in (("0.0.0.0", port + 1), ("127.0.0.1", 0), ("::", port + 2)):
    def listen():
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        s.bind((host, p))
        s.listen(4)
        held.append(s)
        return s.getsockname()
    attempt("listen %s:%d" % (host, p), listen)
note("done", 0)
hold("end")
'''


def relaxed_profile():
    """The kernel-only default profile with socket() of every family allowed."""
    return A.write_file(A.shared_dir() / "landlock-tcp-sockets.toml",
                        f"extends = {json.dumps(str(A.kernel_only_profile()))}\n\n"
                        "[seccomp]\nallow = [\"socket\"]\n")


def listener_in(pid: int, port: int) -> socket.socket:
    def listen() -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", port))
        s.listen(8)
        s.setblocking(False)
        return s
    s = A.in_namespace(pid, "net", listen)
    A.at_cleanup(s.close)
    return s


def attack(judge: A.Judge, net: str, options: list[str]) -> A.Outcome:
    port = random.randrange(20000, 60000)
    listener = None
    with A.Sandbox(SCRIPT, [port], options=options + ["--net", net], timeout="10s") as sb:
        if not sb.wait_ready("listener"):
            judge.misbehaved(f"--net {net}: the script never reached its first hold point")
        else:
            pid = sb.python().pid
            if net == "none":
                A.loopback_up_in(pid)
            listener = listener_in(pid, port)
            sb.go()
            if sb.wait_ready("end"):
                expected = {port} | ({3128} if net == "proxy" else set())
                extra = A.listening_tcp_ports(pid) - expected
                judge.check(not extra, f"--net {net}: the script listens on TCP {sorted(extra)}")
            else:
                judge.misbehaved(f"--net {net}: the script never reached its last hold point")
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    if listener is not None and select.select([listener], [], [], 0.2)[0]:
        conn, peer = listener.accept()
        judge.escape(f"--net {net}: the host's listener in the sandbox accepted {peer} "
                     f"{conn.recv(100)!r}")
        conn.close()
    return o


def test():
    abi = A.landlock_abi()
    if abi < 4:
        A.Judge(f"nothing to try: this kernel's Landlock ABI is {abi}, TCP rules need 4").done()
    judge = A.Judge("TCP connect and bind past Landlock's rules (--net none, --net proxy)")
    outcomes = [attack(judge, "none", ["-p", str(relaxed_profile())]), attack(judge, "proxy", [])]
    judge.done("\n".join(o.describe() for o in outcomes))


if __name__ == "__main__":
    A.main(test)
