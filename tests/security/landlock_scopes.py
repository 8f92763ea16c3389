#!/usr/bin/python3
"""Leave the sandbox's Landlock domain by an abstract UNIX socket or a signal.

Landlock (ABI 6) scopes both to the sandbox's own domain: a connection or datagram to an
abstract socket made by a process outside it, and a signal to a process outside it, are
refused. The sandbox's namespaces already keep the host's sockets and processes out of reach,
so the host puts the targets inside them: it binds an abstract stream listener and a datagram
socket in the sandbox's network namespace, and starts a sleep running as the sandbox's own host
uid in the sandbox's PID namespace (permissions alone would let the script signal it). Neither
is in the sandbox's Landlock domain. The script connects, sends, and sends the sleep SIGSTOP and
SIGKILL. Contained when neither host socket saw a connection or a datagram and the sleep is
alive and not stopped.
"""
import os
import select
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

NO_GVISOR = (  # no gvisor variant (attack.py, PYSANDBOX_VIA)
    "an attack on Landlock's scopes, which a gVisor run does not use, against a victim in the "
    "sandbox's PID namespace beside init: the script on gVisor's kernel cannot see it"
)

SCRIPT = r'''
import os, signal, socket
stream_name, dgram_name = ARGS[:2]
token = ARGS[2][::-1]  # reversed on the command line, which is the script's own
hold("targets")
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1)
    s.connect("\0" + stream_name)
    s.sendall(b"PWNED")
attempt("connect abstract stream", conn)
def dgram():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    return s.sendto(b"PWNED", "\0" + dgram_name)
attempt("sendto abstract dgram", dgram)
def cmdline(pid):
    try:
        return open("/proc/%s/cmdline" % pid, "rb").read()
    except OSError:
        return b""
victims = [int(pid) for pid in os.listdir("/proc") if pid.isdigit()
           and token.encode() in cmdline(pid)]
note("victims", repr(victims))
for victim in victims:
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        attempt("kill(%d, %d)" % (victim, sig), os.kill, victim, sig)
note("done", 0)
hold("end")
'''


def abstract_sockets_in(pid: int, stream_name: str, dgram_name: str):
    def make():
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind("\0" + stream_name)
        listener.listen(8)
        listener.setblocking(False)
        dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        dgram.bind("\0" + dgram_name)
        dgram.setblocking(False)
        return listener, dgram
    listener, dgram = A.in_namespace(pid, "net", make)
    A.at_cleanup(listener.close)
    A.at_cleanup(dgram.close)
    return listener, dgram


def test():
    abi = A.landlock_abi()
    if abi < 6:
        A.Judge(f"nothing to try: this kernel's Landlock ABI is {abi}, scopes need 6").done()
    judge = A.Judge("abstract UNIX sockets and signals outside the sandbox's Landlock domain")
    secret = A.new_secret()
    stream_name, dgram_name = f"landlock-stream-{secret}", f"landlock-dgram-{secret}"
    token = f"landlock-victim-{secret}"
    sockets = victim = None
    with A.Sandbox(SCRIPT, [stream_name, dgram_name, token[::-1]], timeout="10s") as sb:
        if sb.wait_ready("targets"):
            pid = sb.python().pid
            sockets = abstract_sockets_in(pid, stream_name, dgram_name)
            victim = A.victim_in_pid_namespace(pid, token)
            exited = os.pidfd_open(victim)
            A.at_cleanup(lambda: os.close(exited))
            sb.go()
            # The victim dies with the PID namespace: it is judged while the sandbox lasts. A
            # signal kill(2) sent is delivered a moment later: its death is awaited a second.
            if sb.wait_ready("end"):
                judge.check(not select.select([exited], [], [], 1.0)[0],
                            "the victim outside the domain was killed")
                state = A.status(victim).get("State", "")
                judge.check(not state.startswith(("T", "t")),
                            f"the victim outside the domain was stopped ({state})")
            else:
                judge.misbehaved("the script never reached its last hold point")
        else:
            judge.misbehaved("the script never reached its first hold point")
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    if sockets is not None:
        listener, dgram = sockets
        ready = select.select([listener, dgram], [], [], 0.2)[0]
        if listener in ready:
            conn, _ = listener.accept()
            judge.escape(f"the abstract listener outside the domain accepted a connection "
                         f"({conn.recv(100)!r})")
        if dgram in ready:
            judge.escape(f"the abstract datagram socket outside the domain got {dgram.recv(100)!r}")
    if victim is not None and o.note("victims") in (None, "[]"):
        judge.misbehaved("the script never found the victim in its PID namespace")
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
