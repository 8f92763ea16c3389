#!/usr/bin/python3
"""Connect to a host socket under a profile that allows no socket at all.

strict's allowlist (base "minimal") has no socket(): the script cannot make one, so it reaches
no host service, whatever socket file it can see. The host puts two listening unix sockets,
SOCK_SEQPACKET and SOCK_STREAM (mode 0777), in a directory beneath /usr (read-only in the
sandbox, as filesystem.ro has it), and runs the script under a profile that extends strict with
a [policy] of one denied call, so that the audit hook is installed and nothing of the attempt is
its to block. The script
makes each kind of AF_UNIX socket through Python's _socket (SOCK_CLOEXEC added, as Python
always does), connects it to the host's socket of that kind and writes to it (write(): strict has
no send), SOCK_SEQPACKET first: that is
the socket the audit hook itself makes under gVisor, where a hook's channel is a host socket
(runsc --host-uds=open) and gVisor's filter may let the hook's socket() and connect() through
for a profile without sockets.

Through a driver (session, batch, MCP, kernel) the same script runs a second time on gVisor,
under that profile with [sandbox] kernel = "gvisor" and seccomp action "errno" (so that every
attempt is made): there the driver's and the hook's channels are host sockets of exactly that
kind, connected before the seal takes socket(), connect() and seccomp() back (plan/gvisor.hpp).
The script also tries to connect again to the channels' own sockets (a second connection that
got through would write a forged record, looked for in everything the front printed), and to
install a seccomp filter of its own that allows everything, then the host's sockets once more:
filters stack, so its own can only restrict it.

Contained when neither host socket saw a connection (judged on the host, after each run, by
accepting with a timeout) and no forged record came out. A run may end as the profile's denial
ends it (seccomp action "kill": 128 + SIGSYS).
"""
import os
import select
import signal
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import _socket, os
where = ARGS[0]
def connect(path, kind, data=b"PWNED"):
    s = _socket.socket(_socket.AF_UNIX, kind)
    s.settimeout(2)
    s.connect(path)
    return os.write(s.fileno(), data)  # write: strict's allowlist has no send
def host_sockets(when):
    for name, kind in (("seqpacket", _socket.SOCK_SEQPACKET), ("stream", _socket.SOCK_STREAM)):
        attempt(when + "connect " + name, connect, where + "/" + name, kind)
host_sockets("")
# Under gVisor: pysandbox's channels (taken once, then sealed), a forged record through each.
channels = "/run/pysandbox-gvisor/channel"
for name in (sorted(os.listdir(channels)) if os.path.isdir(channels) else []):
    attempt("reconnect " + name, connect, channels + "/" + name, _socket.SOCK_SEQPACKET,
            ("call\tfor" + "ged.by.a.second.connection").encode())
# A filter of its own that allows every call (one BPF "return ALLOW"), with TSYNC as the seal is
# installed and without: stacked filters, the strictest answer wins.
allow_all = ctypes.create_string_buffer(bytes([6, 0, 0, 0, 0, 0, 0xff, 0x7f]), 8)
fprog = ctypes.create_string_buffer(
    (1).to_bytes(2, "little") + bytes(6) + ctypes.addressof(allow_all).to_bytes(8, "little"), 16)
for flags in (1, 0):  # SECCOMP_FILTER_FLAG_TSYNC, none
    note("own seccomp filter, flags %d" % flags,
         syscall(317, 1, flags, ctypes.addressof(fprog)))  # SECCOMP_SET_MODE_FILTER
host_sockets("after its own filter: ")
note("done", 0)
'''


def judge_run(judge, listeners, sb, allowed, where):
    """Run ``sb`` and judge it from the host: no connection reached a listener, no record
    forged through a second connection to a channel came out."""
    o = sb.run()
    A.check_behaved(judge, sb, allowed=allowed)
    for name, s in listeners.items():
        # The run is over: a connection it made is queued already; the timeout is a margin.
        ready, _, _ = select.select([s], [], [], 0.2)
        if s in ready:
            connection, _ = s.accept()
            connection.settimeout(0.5)
            try:
                got = connection.recv(100)
            except OSError:
                got = b""
            judge.escape(f"the host's {name} socket in a read-only directory accepted a "
                         f"connection ({got!r}) from a script whose profile allows no socket "
                         f"({where})")
    if b"forged.by.a.second.connection" in o.output:
        judge.escape("a second connection to pysandbox's channel carried the script's record")
    return o


def test():
    judge = A.Judge("a host socket reached under a profile with no socket (strict's allowlist)")
    where = A.usr_fixture_dir()
    listeners = {}
    for name, kind in (("seqpacket", socket.SOCK_SEQPACKET), ("stream", socket.SOCK_STREAM)):
        s = socket.socket(socket.AF_UNIX, kind)
        s.bind(str(where / name))
        os.chmod(where / name, 0o777)
        s.listen(8)
        s.setblocking(False)
        listeners[name] = s
    policy = '[policy]\ndeny_imports = []\ndeny_calls = ["os.system"]\n'
    profile = A.write_file(A.shared_dir() / "no-socket.toml", 'extends = "strict"\n\n' + policy)
    sb = A.Sandbox(SCRIPT, [str(where)], options=["-p", str(profile)], timeout="10s")
    o = judge_run(judge, listeners, sb, (0, A.signalled(signal.SIGSYS)), A.VIA)
    if A.VIA in ("session", "batch", "mcp", "kernel"):
        # A driver on gVisor under a profile with no socket: its channels sealed.
        on_gvisor = A.write_file(A.shared_dir() / "no-socket-gvisor.toml",
                                 'extends = "strict"\n\n[sandbox]\nkernel = "gvisor"\n\n'
                                 '[limits]\nwall_time = "20s"\n\n'
                                 '[seccomp]\naction = "errno"\n\n' + policy)
        sb = A.Sandbox(SCRIPT, [str(where)], options=["-p", str(on_gvisor)], timeout="20s")
        o = judge_run(judge, listeners, sb, (0,), A.VIA + " on gVisor")
        if o.note("done") is None:
            judge.misbehaved("the script on gVisor did not make every attempt: " + o.describe())
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
