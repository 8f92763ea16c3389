"""Host fixtures: what an attack puts in front of the sandbox, and host-wide state it needs.

Files the script must not change (canary, usr_fixture_dir, file_state, tree_state), a victim
process, a lock between the tests that change host-wide network state, a test interface with
addresses, logging TCP listeners, another /etc/hosts for pysandbox, a tmpfs of known size.
Everything is removed at exit (files.at_cleanup).
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import re
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

from support.env import NOBODY, Verdict
from support.files import at_cleanup, new_secret, remove, shared_dir, write_file
from support.procfs import read_bytes


def canary(directory: Path | str, name: str = "canary.txt", mode: int = 0o644,
           owner: int | None = None) -> tuple[Path, str]:
    """A file holding a fresh secret; returns (path, secret)."""
    secret = new_secret("CANARY")
    path = write_file(Path(directory) / name, f"{secret}\n", mode, owner)
    at_cleanup(lambda: remove(str(path)))
    return path, secret


def usr_fixture_dir(mode: int = 0o755, owner: int | None = None) -> Path:
    """A fresh directory beneath /usr/local/share: inside the default profile's read-only /usr.

    Used to put host files in front of the script that plain permissions would let uid 65534
    modify or use, so that only the sandbox's layers (ro bind, nosuid, Landlock) stand between.
    """
    base = Path("/usr/local/share")
    base.mkdir(parents=True, exist_ok=True)
    return shared_dir(str(base), mode=mode, owner=owner)


def file_state(path: Path | str) -> tuple | None:
    """Content hash and metadata of a host file (None when absent), to compare before/after."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    digest = ""
    if stat.S_ISREG(st.st_mode):
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    return (digest, st.st_mode, st.st_uid, st.st_gid, st.st_nlink, st.st_size, st.st_mtime_ns,
            st.st_ino)


def tree_state(root: Path | str) -> dict:
    """file_state of every entry beneath ``root`` (and root itself)."""
    state = {str(root): file_state(root)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            state[p] = file_state(p)
    return state


def spawn_victim(argv0: str = "sleep", seconds: int = 120, uid: int = NOBODY) -> subprocess.Popen:
    """A host process running as ``uid`` (the sandbox's own host uid by default)."""
    p = subprocess.Popen([argv0, str(seconds)], executable="/bin/sleep", user=uid, group=uid,
                         extra_groups=[], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)

    def stop() -> None:
        if p.poll() is None:
            p.kill()
            p.wait()
    at_cleanup(stop)
    return p


def nobody_name() -> str:
    try:
        return pwd.getpwuid(NOBODY).pw_name
    except KeyError:
        return str(NOBODY)


# --------------------------------------------------------------------------- host fixtures
#
# Some attacks need host-wide state: an interface with addresses, a listening server, a
# filesystem of known size, another /etc/hosts for pysandbox. Everything is removed at exit.

_held_locks: list = []


def host_lock(name: str, timeout: float = 90.0) -> None:
    """Serialize the tests that change host-wide state (addresses, routes) with every other run
    of them on this machine, from any worktree, until this test exits: the lock is the abstract
    unix socket @pysandbox-attack-lock-NAME (freed by the kernel when the test dies; no file)."""
    import errno as _errno
    import socket as _socket
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM | _socket.SOCK_CLOEXEC)
    deadline = time.monotonic() + timeout
    while True:
        try:
            s.bind(b"\0pysandbox-attack-lock-" + name.encode())
            break
        except OSError as e:
            if e.errno != _errno.EADDRINUSE:
                raise
            if time.monotonic() > deadline:
                s.close()
                raise Verdict(f"another test held the host lock {name!r} for {timeout:.0f}s")
            time.sleep(0.1)
    _held_locks.append(s)
    at_cleanup(s.close)


def _ip(*args: str) -> None:
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise Verdict(f"ip {' '.join(args)}: {r.stderr.strip()}")


def host_interface(addresses, routes=()) -> str:
    """A fresh host network interface carrying ``addresses`` (CIDR strings; IPv6 ones added
    without duplicate address detection, so they are usable at once) and ``routes`` (prefixes
    sent to it: what goes there goes nowhere), up; deleted at exit, and its routes with it. A
    dummy interface, or an ifb (also link-less) on a kernel without the dummy driver."""
    name = "pysbt" + uuid.uuid4().hex[:8]
    errors = []
    for kind in ("dummy", "ifb"):
        r = subprocess.run(["ip", "link", "add", name, "type", kind], capture_output=True,
                           text=True)
        if r.returncode == 0:
            break
        errors.append(f"{kind}: {r.stderr.strip()}")
    else:
        raise Verdict(f"cannot create a test interface: {'; '.join(errors)}")
    at_cleanup(lambda: subprocess.run(["ip", "link", "del", name], capture_output=True))
    _ip("link", "set", name, "up")
    for a in addresses:
        if ":" in a:
            _ip("-6", "addr", "add", a, "dev", name, "nodad")
        else:
            _ip("addr", "add", a, "dev", name)
    for route in routes:
        _ip("-6" if ":" in route else "-4", "route", "add", route, "dev", name)
    return name


def host_addresses() -> list[str]:
    """Every address of every host interface (global and host scope; link-local ones need a
    scope id to be reached and are left out), but those of the tests' own interfaces, which
    come and go with other tests."""
    r = subprocess.run(["ip", "-j", "addr", "show"], capture_output=True, text=True)
    if r.returncode != 0:
        raise Verdict(f"ip -j addr show: {r.stderr.strip()}")
    out = []
    for link in json.loads(r.stdout or "[]"):
        if str(link.get("ifname", "")).startswith("pysbt"):
            continue
        for a in link.get("addr_info", []):
            if a.get("scope") in ("global", "host") and not a.get("tentative"):
                out.append(a["local"])
    return out


def hosts_file_prefix(entries) -> list[str]:
    """A ``Sandbox(prefix=...)`` that runs pysandbox in a private mount namespace whose
    /etc/hosts is the host's plus ``entries`` ((address, name) pairs): the names the proxy
    resolves in the supervisor, without DNS. Root does the unshare and the bind; setpriv (as
    nobody) comes after it."""
    base = read_bytes("/etc/hosts") or b"127.0.0.1 localhost\n::1 localhost\n"
    lines = "".join(f"{address} {name}\n" for address, name in entries)
    path = write_file(shared_dir() / "hosts", base + b"\n" + lines.encode())
    return ["unshare", "-m", "--propagation", "private", "--", "sh", "-c",
            'mount --bind "$0" /etc/hosts && exec "$@"', str(path)]


def mount_tmpfs(size: str, mode: int = 0o755) -> Path:
    """A fresh tmpfs of ``size`` (e.g. "512m") mounted on a new directory; unmounted and
    removed at exit."""
    path = tempfile.mkdtemp(prefix="pysandbox-attack-fs-", dir="/tmp")

    def undo() -> None:
        subprocess.run(["umount", "-l", path], capture_output=True)
        try:
            os.rmdir(path)
        except OSError:
            pass
    at_cleanup(undo)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode={mode:o}",
                        "pysandbox-attack", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise Verdict(f"mount -t tmpfs on {path}: {r.stderr.strip()}")
    return Path(path)


def used_bytes(path: Path | str) -> int:
    vfs = os.statvfs(path)
    return (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize


class Listeners:
    """TCP listeners on the host, one per address, all on one port, each connection logged:
    ``log`` holds dicts with ``local`` (the address it was made to), ``peer`` and ``data``
    (everything it sent). It is answered like a tiny HTTP server would: once the first request
    (head, and a Content-Length body) is in, "200 hello from ADDRESS", then this side shuts
    down its writing and goes on reading (and logging) until the peer closes, or for ``linger``
    seconds of silence, so bytes sent after the first request are seen too."""

    def __init__(self, addresses, linger: float = 0.5):
        import socket as _socket
        self._socket = _socket
        self.linger = linger
        self.lock = threading.Lock()
        self.log: list[dict] = []
        self.handlers: list[threading.Thread] = []
        self.stop = threading.Event()
        self.socks: list = []
        self.port = self._bind_all(list(addresses))
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        at_cleanup(self.close)

    def _bind_all(self, addresses) -> int:
        sk = self._socket
        last = None
        for _ in range(50):
            socks, port = [], 0
            try:
                for a in addresses:
                    fam = sk.AF_INET6 if ":" in a else sk.AF_INET
                    s = sk.socket(fam, sk.SOCK_STREAM)
                    socks.append(s)
                    if fam == sk.AF_INET6:
                        s.setsockopt(sk.IPPROTO_IPV6, sk.IPV6_V6ONLY, 1)
                    s.bind((a, port))
                    port = port or s.getsockname()[1]
            except OSError as e:
                for s in socks:
                    s.close()
                last = e
                if e.errno == 98:  # EADDRINUSE: that port is taken on one of them, try another
                    continue
                raise Verdict(f"cannot listen on {a}: {e}")
            for s in socks:
                s.listen(128)
                s.setblocking(False)
            self.socks = list(zip(addresses, socks))
            return port
        raise Verdict(f"cannot find one free port on all of {addresses}: {last}")

    def _serve(self) -> None:
        import select
        while not self.stop.is_set():
            ready, _, _ = select.select([s for _, s in self.socks], [], [], 0.05)
            for s in ready:
                try:
                    conn, peer = s.accept()
                except OSError:
                    continue
                local = conn.getsockname()[0]
                entry = {"local": local, "peer": peer, "data": bytearray(), "time": time.time()}
                with self.lock:
                    self.log.append(entry)
                t = threading.Thread(target=self._handle, args=(conn, entry), daemon=True)
                t.start()
                self.handlers.append(t)

    @staticmethod
    def _request_complete(data: bytes) -> bool:
        end = data.find(b"\r\n\r\n")
        size = 4
        lf = data.find(b"\n\n")
        if lf >= 0 and (end < 0 or lf < end):
            end, size = lf, 2
        if end < 0:
            return False
        m = re.search(rb"(?im)^content-length:[ \t]*(\d+)", bytes(data[:end]))
        body = int(m.group(1)) if m else 0
        return len(data) >= end + size + body

    def _handle(self, conn, entry: dict) -> None:
        sk = self._socket
        answered = False
        deadline = time.monotonic() + 10
        conn.settimeout(self.linger)
        try:
            while time.monotonic() < deadline and not self.stop.is_set():
                try:
                    chunk = conn.recv(65536)
                except sk.timeout:
                    if answered:
                        break
                    continue
                if not chunk:
                    break
                with self.lock:
                    entry["data"] += chunk
                if not answered and self._request_complete(entry["data"]):
                    body = f"hello from {entry['local']}\n".encode()
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                 b"Content-Length: " + str(len(body)).encode() +
                                 b"\r\nConnection: close\r\n\r\n" + body)
                    conn.shutdown(sk.SHUT_WR)
                    answered = True
        except OSError:
            pass
        finally:
            conn.close()

    def settle(self, timeout: float = 5.0) -> list[dict]:
        """Wait for the connections made so far to end; the log (copies of its entries)."""
        deadline = time.monotonic() + timeout
        for t in list(self.handlers):
            t.join(max(0.0, deadline - time.monotonic()))
        with self.lock:
            return [dict(e, data=bytes(e["data"])) for e in self.log]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        for _, s in self.socks:
            s.close()


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (landlock_create_ruleset(NULL, 0, VERSION)), 0 without
    Landlock: what a run's enforcement.landlock_rights depends on."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(ctypes.c_long(444), None, ctypes.c_long(0), ctypes.c_long(1))
    return max(0, int(abi))


def in_namespace(pid: int, kind: str, fn):
    """``fn()`` called in a thread of the test that joined the ``kind`` namespace ("net") of host
    process ``pid``: a socket it makes belongs to that namespace for good, whichever thread uses
    it later. Returns what fn returned (or raises what it raised)."""
    import ctypes
    flags = {"net": 0x40000000}[kind]
    out: dict = {}

    def run() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        try:
            fd = os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
            try:
                if libc.setns(fd, flags) != 0:
                    raise OSError(ctypes.get_errno(), f"setns(/proc/{pid}/ns/{kind})")
            finally:
                os.close(fd)
            out["value"] = fn()
        except BaseException as e:  # handed to the caller
            out["error"] = e
    t = threading.Thread(target=run)  # its namespace ends with it
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def loopback_up_in(pid: int) -> None:
    """Bring lo up in the network namespace of ``pid`` (a sandbox under --net none leaves it
    down), so that a connection there fails only if something refuses it."""
    import fcntl
    import socket as _socket
    import struct

    def up() -> None:
        with _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM) as s:
            ifreq = struct.pack("16sH22x", b"lo", 0x1 | 0x40)  # IFF_UP | IFF_RUNNING
            fcntl.ioctl(s, 0x8914, ifreq)  # SIOCSIFFLAGS
    in_namespace(pid, "net", up)


def listening_tcp_ports(pid: int) -> set[int]:
    """The TCP ports with a listener in the network namespace of ``pid`` (its /proc/PID/net/tcp
    and tcp6, state 0A), as the host reads them."""
    ports = set()
    for name in ("tcp", "tcp6"):
        try:
            lines = read_bytes(f"/proc/{pid}/net/{name}").decode().splitlines()[1:]
        except (OSError, AttributeError):
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A":
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def victim_in_pid_namespace(pid: int, token: str, uid: int = NOBODY) -> int:
    """A process that sleeps, running as ``uid`` (the sandbox's own host uid by default) in the PID namespace
    of host process ``pid``, with ``token`` on its command line; it dies with that namespace.
    Joined from the host, it is in no Landlock domain. Returns its host pid."""
    p = subprocess.Popen(["nsenter", f"--target={pid}", "--pid", "--", "setpriv",
                          f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
                          "/usr/bin/python3", "-S", "-c", "import time; time.sleep(120)", token],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)

    def stop() -> None:
        if p.poll() is None:
            p.kill()
        p.wait()
    at_cleanup(stop)
    children = f"/proc/{p.pid}/task/{p.pid}/children"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            kids = open(children).read().split()
            # Once it runs python as uid: before that it is setpriv, as root.
            if kids and token.encode() in read_bytes(f"/proc/{kids[0]}/cmdline") and \
                    f"Uid:\t{uid}\t" in read_bytes(f"/proc/{kids[0]}/status").decode() and \
                    "python" in os.readlink(f"/proc/{kids[0]}/exe"):
                victim = int(kids[0])
                at_cleanup(lambda: _kill_quietly(victim, token))
                return victim
        except (OSError, TypeError):
            pass
        if p.poll() is not None:
            raise Verdict(f"nsenter into the sandbox's PID namespace failed: "
                          f"{p.stderr.read().decode(errors='replace').strip()}")
        time.sleep(0.02)
    raise Verdict("the victim in the sandbox's PID namespace never started")


def _kill_quietly(pid: int, token: str) -> None:
    """SIGKILL to ``pid`` if it is still the process with ``token`` on its command line."""
    if token.encode() not in (read_bytes(f"/proc/{pid}/cmdline") or b""):
        return
    try:
        os.kill(pid, 9)
    except OSError:
        pass
