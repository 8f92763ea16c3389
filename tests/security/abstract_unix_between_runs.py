#!/usr/bin/python3
"""Talk between two concurrent sandboxes over an abstract unix socket.

Run A binds abstract stream and datagram sockets under a fixed name and waits for a message;
while A is held open, run B connects and sends a secret. Contained when, after B's run and
before A looks, the host sees nothing waiting on any of A's sockets (no queued connection, no
datagram: it duplicates them with pidfd_getfd and polls), A's output does not carry B's secret,
and neither run misbehaved. A must really have bound both names (the host sees two sockets in
A), else nothing was tested. Through gVisor, whose sockets have no host descriptor, the host
checks instead that only runsc runs in A, and that B's connect and sendto failed.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

LISTENER = r'''
import socket, select
name = "\0" + ARGS[0]
ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
attempt("bind stream", ls.bind, name)
attempt("listen", ls.listen, 4)
ds = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
attempt("bind dgram", ds.bind, name + "-d")
ls.setblocking(False)
ds.setblocking(False)
hold("bound")
r, _, _ = select.select([ls, ds], [], [], 1.0)
for s in r:
    if s is ls:
        c, _ = ls.accept()
        c.settimeout(1)
        print("GOT", c.recv(200), flush=True)
    else:
        print("GOT", ds.recv(200), flush=True)
note("done", 0)
'''

SENDER = r'''
import socket
name = "\0" + ARGS[0]
secret = ARGS[1][::-1].encode()
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1)
    s.connect(name)
    s.sendall(secret)
attempt("connect", conn)
attempt("sendto", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(secret,
        name + "-d"))
note("done", 0)
'''


def test():
    judge = A.Judge("abstract unix socket between two concurrent runs")
    name = f"pysandbox-between-{A.new_marker()}"
    secret = A.new_secret()
    # A waits while B starts, runs and ends: its limit covers all of B on a loaded machine (it
    # ends when told to go, so the long limit costs nothing).
    with A.Sandbox(LISTENER, [name], timeout=A.HOLDING_TIMEOUT) as a:
        if not a.wait_ready("bound"):
            judge.misbehaved("run A never bound its sockets")
        b = A.Sandbox(SENDER, [name, secret[::-1]])
        ob = b.run()
        A.check_behaved(judge, b, allowed=(0,), expect_notes=["done"])
        if A.VIA == "gvisor":
            # A's sockets are gVisor's, no host descriptor: the host checks that only runsc runs
            # in either sandbox; that B's message is not in A's output and that B's connect and
            # sendto failed (each gVisor has its own abstract names) are judged below.
            for problem in a.gvisor_problems():
                judge.escape(f"run A: {problem}")
            for what in b.outcome.succeeded(""):
                if what in ("connect", "sendto"):
                    judge.escape(f"run B's {what} to A's name succeeded")
        else:
            py = a.python()
            # A session's driver holds a socket of its own (its channel): not one A bound.
            own = a.driver_fds()
            sockets = [fd for fd, t in A.fd_targets(py.pid).items()
                       if t.startswith("socket:") and fd not in own]
            if len(sockets) < 2:
                judge.misbehaved(f"run A does not hold its bound sockets (fds {sockets}): "
                                 "nothing was tested")
            waiting = [fd for fd in A.readable_sockets(py.pid) if fd not in own]
            if waiting:
                judge.escape(f"run B reached run A: something waits on A's socket fd(s) "
                             f"{waiting}")
        a.go()
    oa = A.check_behaved(judge, a, allowed=(0,), expect_notes=["done"])
    bound = [w for w in ("bind stream", "listen", "bind dgram") if str(oa.note(w)).startswith("ok")]
    if len(bound) < 3:
        judge.misbehaved(f"run A did not bind both names ({bound}): nothing was tested")
    A.check_secrets(judge, oa, {"run B's message in run A": secret})
    judge.done(oa.describe() + "\n" + ob.describe())


if __name__ == "__main__":
    A.main(test)
