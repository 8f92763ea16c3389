"""The host's view of a run's processes, through /proc.

Processes are found by a marker (a unique token on their command lines, see files.new_marker),
or by the namespaces a run made; each read returns an empty value when the process is gone.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import select
import signal
import socket
import time

from support.env import Verdict

# libc with errno, for the calls Python's os module lacks (pidfd_getfd, ptrace).
libc = ctypes.CDLL(None, use_errno=True)

def read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def cmdline(pid: int) -> list[bytes]:
    data = read_bytes(f"/proc/{pid}/cmdline")
    return data.split(b"\0") if data else []


def all_pids() -> list[int]:
    return [int(n) for n in os.listdir("/proc") if n.isdigit()]


def status(pid: int) -> dict[str, str]:
    data = read_bytes(f"/proc/{pid}/status")
    fields = {}
    for line in (data or b"").decode(errors="replace").splitlines():
        k, _, v = line.partition(":")
        fields[k] = v.strip()
    return fields


def proportional_kib(pid: int) -> int:
    """The process's proportional resident memory (Pss, KiB; 0 once it is gone)."""
    for line in (read_bytes(f"/proc/{pid}/smaps_rollup") or b"").splitlines():
        if line.startswith(b"Pss:"):
            return int(line.split()[1])
    return 0


def readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def exe(pid: int) -> str:
    return readlink(f"/proc/{pid}/exe")


NAMESPACES = ("user", "mnt", "pid", "pid_for_children", "net", "ipc", "uts", "cgroup", "time",
              "time_for_children")


def namespaces(pid: int) -> dict[str, str]:
    return {ns: readlink(f"/proc/{pid}/ns/{ns}") for ns in NAMESPACES}


NS_GET_PARENT = 0xB702  # ioctl on a namespace fd: its parent namespace, as a new fd


def sandbox_ns_fd(pid: int, depth: int) -> int:
    """An fd of the PID namespace of the sandbox ``pid`` is in: the namespace one level below
    the host's, its own (``depth``, its NSpid entries less one, is 1) or the ancestor of a
    nested one. OSError when the process is gone."""
    fd = os.open(f"/proc/{pid}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    try:
        for _ in range(depth - 1):
            parent = fcntl.ioctl(fd, NS_GET_PARENT)
            os.close(fd)
            fd = parent
    except OSError:
        os.close(fd)
        raise
    return fd


def sandbox_depth(nspid: list, fork: bool = False) -> int:
    """The ``depth`` of sandbox_of for a process whose NSpid has these entries. Through batch
    --fork a job's sandbox is nested in the zygote's, one level deeper: the zygote's own
    processes (depth 0) belong to no job's sandbox."""
    return len(nspid) - (2 if fork else 1)


def sandbox_of(pid: int, depth: int) -> str | None:
    """sandbox_ns_fd's namespace as its link reads ("pid:[N]"), or None when ``pid`` is gone."""
    if depth < 1:
        return None
    if depth == 1:
        return readlink(f"/proc/{pid}/ns/pid") or None
    try:
        fd = sandbox_ns_fd(pid, depth)
    except OSError:
        return None
    try:
        return f"pid:[{os.fstat(fd).st_ino}]"
    finally:
        os.close(fd)


def marker_pids(marker: str, *, whole_arg: bool = False) -> list[int]:
    """Live host processes (not this one) whose argv carries ``marker``: in any argument, or
    with ``whole_arg`` as one argument of its own."""
    token = marker.encode()
    me = os.getpid()
    out = []
    for pid in all_pids():
        if pid == me:
            continue
        argv = cmdline(pid)
        if token in argv if whole_arg else any(token in arg for arg in argv):
            out.append(pid)
    return out


def fd_targets(pid: int) -> dict[int, str]:
    out = {}
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for name in names:
        out[int(name)] = readlink(f"/proc/{pid}/fd/{name}")
    return out


def _socket_dups(pid: int):
    """(fd, a duplicate of it) for each socket ``pid`` holds, through pidfd_getfd(); a socket
    closed meanwhile is left out. Each duplicate is closed once the caller moves on."""
    targets = [fd for fd, t in fd_targets(pid).items() if t.startswith("socket:")]
    if not targets:
        return
    pidfd = libc.syscall(ctypes.c_long(434), ctypes.c_long(pid), ctypes.c_long(0))
    if pidfd < 0:
        raise Verdict(f"pidfd_open({pid}) failed: errno {ctypes.get_errno()}")
    try:
        for fd in targets:
            dup = libc.syscall(ctypes.c_long(438), ctypes.c_long(pidfd), ctypes.c_long(fd),
                               ctypes.c_long(0))
            if dup < 0:
                continue  # closed meanwhile
            try:
                yield fd, dup
            finally:
                os.close(dup)
    finally:
        os.close(pidfd)


def socket_families(pid: int) -> dict[int, str]:
    """fd -> family ('unix', 'inet', 'netlink', 'vsock', 'packet', or a number) of each socket
    the process holds, asked of the socket itself: the host duplicates it with pidfd_getfd()
    and reads SO_DOMAIN."""
    names = {socket.AF_UNIX: "unix", socket.AF_INET: "inet", socket.AF_INET6: "inet6",
             socket.AF_NETLINK: "netlink", 40: "vsock", 17: "packet"}
    out = {}
    for fd, dup in _socket_dups(pid):
        s = socket.socket(fileno=dup)
        fam = s.getsockopt(socket.SOL_SOCKET, 39)  # SO_DOMAIN
        s.detach()
        out[fd] = names.get(fam, str(fam))
    return out


def readable_sockets(pid: int) -> list[int]:
    """The fds of ``pid``'s sockets that have something waiting (a queued connection on a
    listener, a datagram, bytes), asked of the sockets themselves: the host duplicates each with
    pidfd_getfd() and polls it, reading nothing."""
    return [fd for fd, dup in _socket_dups(pid) if select.select([dup], [], [], 0)[0]]


def mountinfo(pid: int) -> list[str]:
    data = read_bytes(f"/proc/{pid}/mountinfo")
    return (data or b"").decode(errors="replace").splitlines()


def mount_table(pid: int) -> list[tuple]:
    """(mount id, mount point, per-mount options, fs type, source, super options) per mount."""
    rows = []
    for line in mountinfo(pid):
        left, _, right = line.partition(" - ")
        f = left.split()
        r = right.split()
        rows.append((f[0], f[4], f[5], r[0] if r else "", r[1] if len(r) > 1 else "",
                     r[2] if len(r) > 2 else ""))
    return rows


class Proc:
    """A host-side snapshot of one process of the run."""

    def __init__(self, pid: int):
        self.pid = pid
        self.status = status(pid)
        self.exe = exe(pid)
        self.ns = namespaces(pid)
        self.nspid = [int(x) for x in self.status.get("NSpid", "0").split()]
        self.cmdline = cmdline(pid)

    @property
    def inner_pid(self) -> int:
        return self.nspid[-1] if self.nspid else 0

    @property
    def inside(self) -> bool:
        """In a PID namespace below the host's (the supervisor is not)."""
        return len(self.nspid) > 1

    @property
    def is_python(self) -> bool:
        return os.path.basename(self.exe).startswith("python")

    def ids(self) -> set[int]:
        ids = set()
        for key in ("Uid", "Gid"):
            ids |= {int(x) for x in self.status.get(key, "").split()}
        return ids

    def caps(self) -> dict[str, int]:
        return {k: int(self.status.get(k, "0"), 16)
                for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}

    def __repr__(self) -> str:
        return (f"<pid {self.pid} inner {self.inner_pid} exe {self.exe} "
                f"state {self.status.get('State')} tracer {self.status.get('TracerPid')}>")


def _host_ns(kind: str) -> str:
    return readlink(f"/proc/1/ns/{kind}")


def run_processes(marker: str, pid_namespaces=(), user_namespaces=()) -> list[int]:
    """Host processes that belong to the run: marker in argv, or inside one of its namespaces."""
    found = set(marker_pids(marker))
    pidns = set(pid_namespaces) - {_host_ns("pid")}
    userns = set(user_namespaces) - {_host_ns("user")}
    if pidns or userns:
        for pid in all_pids():
            if pid == os.getpid():
                continue
            if (readlink(f"/proc/{pid}/ns/pid") in pidns
                    or readlink(f"/proc/{pid}/ns/user") in userns):
                found.add(pid)
    return sorted(found)


def kill_pids(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def settle(probe, timeout: float, interval: float = 0.02):
    """Call ``probe()`` until it returns something false (nothing left, say) or ``timeout``
    seconds have passed; its last value."""
    deadline = time.monotonic() + timeout
    while (value := probe()) and time.monotonic() < deadline:
        time.sleep(interval)
    return value


def sandboxed_python_pid(marker: str) -> int:
    """Host pid of the sandboxed interpreter carrying ``marker`` as an argument (the script).

    The supervisor, a setpriv wrapper and the sandbox's init may carry the marker in their argv
    too; the interpreter is the one whose executable is a python. Should several match, prefer
    those in a foreign PID namespace, then the leaf.
    """
    def exe_name(pid: int) -> str:
        return os.path.basename(exe(pid))

    def pid_namespace(pid: int) -> str:
        return readlink(f"/proc/{pid}/ns/pid")

    def parent(pid: int) -> int:
        try:
            return int(status(pid)["PPid"])
        except (KeyError, ValueError):
            return -1

    carrying = marker_pids(marker, whole_arg=True)
    candidates = [pid for pid in carrying if exe_name(pid).startswith("python")]
    if len(candidates) > 1:
        own = pid_namespace(os.getpid())
        candidates = [p for p in candidates if pid_namespace(p) != own] or candidates
    if len(candidates) > 1:
        parents = {parent(pid) for pid in candidates}
        candidates = [pid for pid in candidates if pid not in parents]
    if len(candidates) != 1:
        details = {pid: (exe_name(pid), cmdline(pid))
                   for pid in marker_pids(marker, whole_arg=True)}
        raise AssertionError(f"expected exactly one sandboxed python carrying {marker}, found "
                             f"{candidates}: {details}")
    return candidates[0]
