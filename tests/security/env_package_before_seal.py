#!/usr/bin/python3
"""A hostile package in a --with-env environment runs before gVisor's seal (and may skip it).

On gVisor, where the profile allows the script no socket (paranoid), gVisor's filter lets
socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC), connect and seccomp through so that
sitecustomize can connect pysandbox's channels, and sitecustomize then installs the seal that
denies them again, before the script runs (plan/gvisor.hpp). Code that runs before the seal runs
with those calls open. On PYTHONPATH, an environment's site directory would come ahead of the
standard library, so a package there named as a module Python or sitecustomize imports at its
start (encodings; ctypes where the seal went in through it) would be imported instead of the
standard library's, before the seal. Package code is as hostile as the script
(env_hostile_package.py).

The environment holds one wheel with two top-level packages. `encodings`, which Python imports
at its start, connects (where the gVisor channels' directory exists) to a host SOCK_SEQPACKET
socket (mode 0777) in a directory beneath /usr (read-only in the sandbox), writes "ENCODINGS" to
it, and puts the standard library's encodings in its place. `ctypes`, imported by sitecustomize
where the seal goes in through ctypes, connects and writes "PACKAGE", then pretends to be ctypes
well enough that the seal's syscall() "succeeds" without installing anything; the script, whose
policy lets it connect (one denied call, os.system, so the hook is installed and blocks nothing
of this), then connects and writes "SCRIPT". Control: the script imports a module of the
environment first, found right after the sandbox's own modules on sys.path (the environment is
there, not a failed install).

Run through `run` the profile is strict on the host kernel (where sitecustomize imports no
ctypes); through the gvisor variant it is paranoid (gVisor, sealed channels), with the same
policy. Contained when, judged from the host, the socket saw no connection; the run may end as
the profile's denial ends it (128 + SIGSYS), or with 125 (the seal failed).
"""
import os
import select
import signal
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A  # noqa: E402
from support.running import run  # noqa: E402
from support.wheels import make_wheel  # noqa: E402

RUN_ONLY = "pysandbox env is a command of its own; --with-env is a run option here"

# The environment's encodings, which Python imports at its start, before site: on gVisor, where
# the channels' calls are open until the seal, it connects; then it puts the standard library's
# encodings in its place, or Python would not start.
# What either package runs first: a connection to the host's socket, and a word through it.
CONNECT = r'''
def _connect(word):
    import _socket, os
    try:
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        s.connect({where!r})
        os.write(s.fileno(), word)
    except OSError:
        pass
'''

FAKE_ENCODINGS = CONNECT + r'''
import os, sys
if os.path.isdir("/run/pysandbox-gvisor/channel"):
    _connect(b"ENCODINGS")
_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_path = sys.path[:]
sys.path[:] = [entry for entry in _path if entry != _here]
del sys.modules["encodings"]
import encodings
sys.path[:] = _path
'''

# The environment's ctypes, where sitecustomize seals through ctypes: connects, then answers the
# seal's syscall() as if it worked.
FAKE_CTYPES = CONNECT + r'''
_connect(b"PACKAGE")
def create_string_buffer(init, size=None):
    return init
def addressof(buffer):
    return 0
def get_errno():
    return 0
class CDLL:
    def __init__(self, *args, **kwargs):
        pass
    def syscall(self, *args):
        return 0
'''

SCRIPT = r'''
import _socket, os, sys
import marker  # the environment is on sys.path all the same (once sealed), before the stdlib
print("value", marker.VALUE, sys.path.index(os.path.dirname(marker.__file__)) ==
      sys.path.index("/sandbox/.pysandbox") + 1, flush=True)
s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
s.connect({where!r})
os.write(s.fileno(), b"SCRIPT")
print("connected", flush=True)
'''


def caller_uid():
    return A.NOBODY if A.RUN_AS == "nobody" else 0


def test():
    judge = A.Judge("a --with-env package that shadows a standard module runs before gVisor's "
                    "seal")
    where = A.usr_fixture_dir()
    target = str(where / "seqpacket")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(target)
    os.chmod(target, 0o777)
    listener.listen(8)
    listener.setblocking(False)

    store = A.shared_dir(owner=caller_uid())
    house = A.shared_dir()
    make_wheel(house, "evil_ctypes", "1.0",
               {"encodings/__init__.py": FAKE_ENCODINGS.format(where=target),
                "ctypes/__init__.py": FAKE_CTYPES.format(where=target),
                "marker.py": "VALUE = 7\n"})
    made = run(["env", "create", "--cache-dir", str(store), "--find-links", str(house),
                "evil_ctypes"], timeout=180)
    if made.returncode != 0:
        judge.misbehaved("the wheel did not install" + made.describe())
        judge.done()
        return
    env_id = made.stdout.decode().strip()
    base = "paranoid" if A.VIA == "gvisor" else "strict"
    profile = A.write_file(A.shared_dir() / "with-env.toml",
                           f'extends = "{base}"\n\n[limits]\nwall_time = "20s"\n\n'
                           '[policy]\ndeny_imports = []\ndeny_calls = ["os.system"]\n')
    script = A.write_file(A.shared_dir() / "connect.py", SCRIPT.format(where=target))
    used = run(["run", "-p", str(profile), "--with-env", env_id, "--cache-dir", str(store),
                str(script)], timeout=60)
    if used.returncode not in (0, 125, A.signalled(signal.SIGSYS)):
        judge.misbehaved("the run ended otherwise than contained or refused" + used.describe())
    if b"value 7 True\n" not in used.stdout:
        judge.misbehaved("the script did not import the environment's module from sys.path[1]"
                         + used.describe())
    got = []
    while select.select([listener], [], [], 0.2)[0]:  # a connection made is queued already
        connection, _ = listener.accept()
        connection.settimeout(0.5)
        try:
            got.append(connection.recv(100))
        except OSError:
            got.append(b"")
        connection.close()
    if got:
        judge.escape(f"the host's SOCK_SEQPACKET socket in a read-only directory accepted "
                     f"{len(got)} connection(s) {got!r} under profile {base} "
                     f"(ENCODINGS, PACKAGE: before the seal; SCRIPT: after a seal skipped)")
    judge.done(made.describe() + used.describe())


if __name__ == "__main__":
    A.main(test)
