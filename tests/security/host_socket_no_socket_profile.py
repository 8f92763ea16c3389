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

Contained when neither host socket saw a connection (judged on the host, after the run). The
run may end as the profile's denial ends it (seccomp action "kill": 128 + SIGSYS).
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
for name, kind in (("seqpacket", _socket.SOCK_SEQPACKET), ("stream", _socket.SOCK_STREAM)):
    def connect():
        s = _socket.socket(_socket.AF_UNIX, kind)
        s.settimeout(2)
        s.connect(where + "/" + name)
        return os.write(s.fileno(), b"PWNED")  # write: strict's allowlist has no send
    attempt("connect " + name, connect)
note("done", 0)
'''

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
    profile = A.write_file(A.shared_dir() / "no-socket.toml",
                           'extends = "strict"\n\n'
                           '[policy]\ndeny_imports = []\ndeny_calls = ["os.system"]\n')
    sb = A.Sandbox(SCRIPT, [str(where)], options=["-p", str(profile)], timeout="10s")
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0, A.signalled(signal.SIGSYS)))
    ready, _, _ = select.select(list(listeners.values()), [], [], 0.2)
    for name, s in listeners.items():
        if s in ready:
            connection, _ = s.accept()
            connection.settimeout(0.5)
            try:
                got = connection.recv(100)
            except OSError:
                got = b""
            judge.escape(f"the host's {name} socket in a read-only directory accepted a "
                         f"connection ({got!r}) from a script whose profile allows no socket")
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
