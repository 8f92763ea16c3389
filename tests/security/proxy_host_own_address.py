#!/usr/bin/python3
"""Reach the host's own services through an allowlisted NAME that resolves to a host address.

The proxy connects from the host's network namespace, so a name whose answer is any address
of the host (not only 127/8 and ::1: the address of eth0, of a bridge, of any interface, or
0.0.0.0 and ::, which reach the host itself) lets the script talk to every service the host
listens on. The test gives a fresh host interface 198.51.100.7/32, a documentation address that
is not in any private range (so only "it is the host's own" can refuse it), and listens on it
and on every global- and host-scope address of every interface the host has (eth0's included),
all on one port; a private /etc/hosts for pysandbox maps an allowlisted name to each, and to
0.0.0.0 and ::.

Contained when every such name, by CONNECT and by plain http://, gets 502 with a body that
mentions pysandbox and a "network" violation in the --json result, and no listener ever sees a
connection for it. Control: 198.51.100.7 allowlisted literally is reached (the operator's
choice).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

NO_GVISOR = (  # no gvisor variant (attack.py, PYSANDBOX_VIA)
    "an attack on the --net proxy, which `run --kernel gvisor` refuses (exit 125): gVisor's "
    "network is none or loopback"
)

OWN = "198.51.100.7"


def test():
    addresses = [a for a in A.host_addresses() if a != OWN]
    listen = [OWN] + addresses
    denied = [("own", OWN), ("any4", "0.0.0.0"), ("any6", "::")]
    denied += [(f"host{i}", a) for i, a in enumerate(addresses)]
    A.proxy_resolution_attack("allowlisted names that resolve to the host's own addresses",
                              interface=[f"{OWN}/32"], listen=listen, denied=denied,
                              allowed_literals=[OWN])


if __name__ == "__main__":
    A.main(test)
