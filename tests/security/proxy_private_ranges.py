#!/usr/bin/python3
"""Reach private networks, link-local addresses and cloud metadata through an allowlisted NAME.

The allowlist says NAME:PORT, and the operator means the service out there; but the name
resolves (in the supervisor, on the host) to whatever its DNS says, and a name whose answer is
10.x, 172.16-31.x, 192.168.x, 100.64/10, fc00::/7, 169.254/16, fe80::/10 or a metadata address
(169.254.169.254, 100.100.100.200, fd00:ec2::254) turns the proxy into a way into the host's
private network and its cloud credentials (DNS rebinding does it to any name). The test gives
a fresh host interface those addresses (and /24 and /64 around them, whose other addresses
lead nowhere), listens on them, and maps one allowlisted name to each (and to an unassigned
address of each range) through a private /etc/hosts for pysandbox.

Contained when every such name, by CONNECT and by plain http://, gets 502 with a body that
mentions pysandbox and a "network" violation in the --json result, and no listener ever sees a
connection for it. Control: 10.213.0.1 and fd12:3456::1 allowlisted literally are reached.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

NO_GVISOR = (  # no gvisor variant (attack.py, PYSANDBOX_VIA)
    "an attack on the --net proxy, which `run --kernel gvisor` refuses (exit 125): gVisor's "
    "network is none or loopback"
)

INTERFACE = ["10.213.0.1/24", "172.16.213.1/24", "192.168.213.1/24", "100.64.213.1/24",
             "169.254.169.254/32", "169.254.213.1/32", "100.100.100.200/32",
             "fd00:ec2::254/128", "fd12:3456::1/64", "fe80::213:1/64"]
LISTEN = ["10.213.0.1", "172.16.213.1", "192.168.213.1", "100.64.213.1", "169.254.169.254",
          "169.254.213.1", "100.100.100.200", "fd00:ec2::254", "fd12:3456::1"]
DENIED = [("ten", "10.213.0.1"), ("ten-far", "10.213.0.77"),
          ("rfc1918-172", "172.16.213.1"), ("rfc1918-172-far", "172.16.213.77"),
          ("rfc1918-192", "192.168.213.1"), ("rfc1918-192-far", "192.168.213.77"),
          ("cgnat", "100.64.213.1"), ("cgnat-far", "100.64.213.77"),
          ("metadata", "169.254.169.254"), ("linklocal", "169.254.213.1"),
          ("metadata-alibaba", "100.100.100.200"), ("metadata-ec2v6", "fd00:ec2::254"),
          ("ula", "fd12:3456::1"), ("ula-far", "fd12:3456::77"), ("linklocal6", "fe80::213:1")]


def test():
    A.proxy_resolution_attack("allowlisted names that resolve to private, link-local or "
                              "metadata addresses", interface=INTERFACE, listen=LISTEN,
                              denied=DENIED, allowed_literals=["10.213.0.1", "fd12:3456::1"])


if __name__ == "__main__":
    A.main(test)
