#!/usr/bin/python3
"""Reach host services over abstract unix sockets (and learn their names from /proc/net/unix).

Abstract unix sockets are not files: no mount hides them, only the network namespace (and
Landlock's scoping) does. The host binds a stream listener and a datagram socket under
abstract names that contain a secret, and tells the script the names. The script connects,
sends, and dumps /proc/net/unix looking for host socket names. Contained when neither host
socket ever saw a connection or datagram and the names' secret never appeared in the output.
"""
import os
import select
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import socket
stream_name, dgram_name = ARGS[:2]
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1)
    s.connect("\0" + stream_name[::-1])
    s.sendall(b"PWNED")
attempt("connect abstract stream", conn)
def dgram():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    return s.sendto(b"PWNED", "\0" + dgram_name[::-1])
attempt("sendto abstract dgram", dgram)
def seqpacket():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(1)
    s.connect("\0" + stream_name[::-1])
attempt("connect abstract seqpacket", seqpacket)
print("NETUNIX", open("/proc/net/unix").read(), flush=True)
note("done", 0)
'''


def test():
    judge = A.Judge("host abstract unix sockets (stream and datagram)")
    secret = A.new_secret()
    stream_name = f"pysandbox-host-stream-{secret}"
    dgram_name = f"pysandbox-host-dgram-{secret}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + stream_name)
    listener.listen(8)
    listener.setblocking(False)
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dgram.bind("\0" + dgram_name)
    dgram.setblocking(False)
    # Names are passed reversed so that argv (visible in the script's own /proc) does not
    # carry the secret in the clear.
    sb = A.Sandbox(SCRIPT, [stream_name[::-1], dgram_name[::-1]])
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    r, _, _ = select.select([listener, dgram], [], [], 0.2)
    if listener in r:
        conn, _ = listener.accept()
        judge.escape(f"the host abstract listener accepted a connection ({conn.recv(100)!r})")
    if dgram in r:
        judge.escape(f"the host abstract datagram socket got {dgram.recv(100)!r}")
    A.check_secrets(judge, o, {"host abstract socket names": secret})
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
