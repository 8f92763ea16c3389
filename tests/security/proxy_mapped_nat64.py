#!/usr/bin/python3
"""Dress a forbidden IPv4 destination as IPv6: mapped, compatible and NAT64 forms.

An allowlisted NAME whose answer is ::ffff:a.b.c.d (IPv4-mapped: an AF_INET6 socket connects to
a.b.c.d itself), ::a.b.c.d (IPv4-compatible) or 64:ff9b::a.b.c.d (NAT64: a translating gateway
turns it into a.b.c.d) reaches the IPv4 address behind it, while a check written for IPv4
never sees one. The test gives a fresh host interface 10.213.0.1/24 (private),
169.254.169.254/32 (metadata) and 198.51.100.7/32 (the host's own), and assigns the compatible
and NAT64 forms of them as IPv6 addresses of the same interface, so that a connection to any
form lands on a listener of the test; a private /etc/hosts for pysandbox maps an allowlisted
name to each form (and ::ffff:127.0.0.1), and to the three forms of 10.213.0.77, an address of
the private /24 that nothing has (the compatible and NAT64 prefixes are routed into the test
interface, so those lead nowhere too).

Contained when every such name, by CONNECT and by plain http://, gets 502 with a body that
mentions pysandbox and a "network" violation in the --json result, and no listener ever sees a
connection for it. Control: 10.213.0.1 allowlisted literally is reached.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

NO_GVISOR = (  # no gvisor variant (attack.py, PYSANDBOX_VIA)
    "an attack on the --net proxy, which `run --kernel gvisor` refuses (exit 125): gVisor's "
    "network is none or loopback"
)

V4 = {"ten": "10.213.0.1", "meta": "169.254.169.254", "own": "198.51.100.7"}
COMPAT = {tag: f"::{a}" for tag, a in V4.items()}
NAT64 = {tag: f"64:ff9b::{a}" for tag, a in V4.items()}
NAT64["lo"] = "64:ff9b::127.0.0.1"


def test():
    interface = ["10.213.0.1/24", "169.254.169.254/32", "198.51.100.7/32"]
    interface += [f"{a}/128" for a in list(COMPAT.values()) + list(NAT64.values())]
    listen = list(V4.values()) + ["127.0.0.1"] + list(COMPAT.values()) + list(NAT64.values())
    denied = [(f"mapped-{tag}", f"::ffff:{a}") for tag, a in V4.items()]
    denied += [("mapped-lo", "::ffff:127.0.0.1"), ("mapped-ten-far", "::ffff:10.213.0.77")]
    denied += [(f"compat-{tag}", a) for tag, a in COMPAT.items()]
    denied += [(f"nat64-{tag}", a) for tag, a in NAT64.items()]
    # Not assigned anywhere: private only once translated. The routes send them into the test
    # interface (nowhere), not out through the host's default route.
    denied += [("compat-ten-far", "::10.213.0.77"), ("nat64-ten-far", "64:ff9b::10.213.0.77")]
    A.proxy_resolution_attack("allowlisted names that resolve to IPv4-mapped, IPv4-compatible "
                              "or NAT64 forms of forbidden addresses", interface=interface,
                              listen=listen, denied=denied, allowed_literals=["10.213.0.1"],
                              routes=["::/96", "64:ff9b::/96"])


if __name__ == "__main__":
    A.main(test)
