#!/usr/bin/python3
"""Use AF_NETLINK: route/link dumps, uevents, audit, sock_diag, netfilter, generic netlink.

Netlink is the kernel's configuration bus; in a user namespace some of it is reachable and
some of its families are not namespaced at all (uevents, audit). The script opens one socket
per protocol, sends an RTM_GETLINK dump and a SOCK_DIAG unix dump, prints the replies in hex,
and keeps the sockets open. Contained when, judged from the host while the run is held, no
process of the run holds a netlink (or any non-AF_UNIX) socket, none of the host's interface
MAC addresses appears in the output, and the seccomp filter denies socket(AF_NETLINK).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import socket, struct
keep = []
protocols = {"ROUTE": 0, "SOCK_DIAG": 4, "XFRM": 6, "AUDIT": 9, "NETFILTER": 12,
             "KOBJECT_UEVENT": 15, "GENERIC": 16, "CRYPTO": 21}
for name, proto in protocols.items():
    s = attempt("socket(AF_NETLINK, %s)" % name, socket.socket, socket.AF_NETLINK,
                socket.SOCK_RAW, proto)
    if not isinstance(s, socket.socket):
        continue
    keep.append(s)
    s.settimeout(0.5)
    if name == "ROUTE":
        # RTM_GETLINK (18), NLM_F_REQUEST|NLM_F_DUMP, struct ifinfomsg.
        msg = struct.pack("=IHHII", 32, 18, 0x301, 1, 0) + bytes(16)
        attempt("RTM_GETLINK send", s.send, msg)
        for _ in range(4):
            r = attempt("RTM_GETLINK recv", s.recv, 65536)
            if isinstance(r, bytes):
                print("HEX", r.hex(), flush=True)
    if name == "KOBJECT_UEVENT":
        attempt("bind uevent multicast", s.bind, (0, 1))
        r = attempt("uevent recv", s.recv, 65536)
    if name == "AUDIT":
        # AUDIT_GET (1000)
        attempt("AUDIT_GET", s.send, struct.pack("=IHHII", 16, 1000, 1, 1, 0))
        attempt("AUDIT_GET recv", s.recv, 65536)
note("done", 0)
hold()
'''


def host_macs() -> dict[str, str]:
    macs = {}
    base = "/sys/class/net"
    for name in os.listdir(base) if os.path.isdir(base) else []:
        try:
            mac = open(f"{base}/{name}/address").read().strip()
        except OSError:
            continue
        if mac and mac != "00:00:00:00:00:00":
            macs[f"host {name} MAC"] = mac.replace(":", "")
    return macs


def test():
    judge = A.Judge("AF_NETLINK sockets (route, uevent, audit, sock_diag, ...)")
    with A.Sandbox(SCRIPT) as sb:
        if sb.wait_ready():
            for p in sb.inside():
                for fd, fam in A.socket_families(p.pid).items():
                    if fam != "unix":
                        judge.escape(f"pid {p.inner_pid} holds a {fam} socket (fd {fd})")
            A.check_filter_denies(judge, sb.filters(), [
                ("socket(AF_NETLINK, NETLINK_ROUTE)", 41, A.AUDIT_ARCH_X86_64, (16, 3, 0)),
                ("socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT)", 41, A.AUDIT_ARCH_X86_64,
                 (16, 2, 15)),
                ("socket(AF_PACKET)", 41, A.AUDIT_ARCH_X86_64, (17, 3, 0))])
        else:
            judge.misbehaved("the script never reached the hold point")
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    A.check_secrets(judge, o, host_macs())
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
