"""Shared helpers for the pysandbox attack suite (tests/security/*.py).

Not a test itself. Every other ``*.py`` file in this directory is one attack: an executable,
stdlib-only Python 3 program that runs on the HOST, writes a hostile script, runs pysandbox on
it and judges the outcome from the host side. It prints exactly one verdict line and exits:

    0  ``contained: <what>``   the attack was contained AND the run behaved
    1  ``ESCAPED: <what>``     the attack got through, or the run misbehaved (pysandbox crashed
                               or failed, the script hung, a process outlived the run, ...)
    2  ``ERROR: <what>``       the test itself could not run (not root, binary missing, a bug)

What the hostile script prints is never evidence of containment. It is scanned for secrets
(which must be absent), and an "ok" it reports for a forbidden call counts as an escape; the
verdict otherwise rests on what the host sees: files, listeners, /proc of the sandbox's
processes (fds, namespaces, mounts, credentials, tracer, memory), the seccomp filter the kernel
holds for the sandboxed process (read with PTRACE_SECCOMP_GET_FILTER and evaluated here), and
what is left in the host's /proc after the run. A --json run must also print one result valid
under the result schema (tests/result_schema.py); one that does not makes the run misbehaved.

Environment:
  PYSANDBOX     the binary (default: <repo>/build/bin/pysandbox)
  PYSANDBOX_AS  ``root`` (default): run pysandbox as root, the script runs as host uid 65534;
                ``nobody``: run pysandbox as uid/gid 65534 through setpriv.
                Either way the tests themselves must run as root: they create victims, fixtures
                and canaries owned by other users and inspect the sandbox's /proc.
  PYSANDBOX_VIA ``run`` (default): each hostile script is one ``pysandbox run``;
                ``session``: the same script is the one cell of a ``pysandbox session``;
                ``batch``: the one job of a ``pysandbox batch``; ``batchfork``: the same
                through ``pysandbox batch --fork`` (the job's sandbox is forked by a zygote,
                src/engine/zygote.hpp); ``mcp``: the one run_python
                call to a ``pysandbox mcp`` server (see "Through a session" and "Through batch
                and MCP" below). An attack that only makes sense for ``run`` says so with a
                module-level ``RUN_ONLY = "why"``; it is then an error (exit 2) through the
                others, and tests/CMakeLists.txt does not register it there. An attack on
                sessions themselves (several cells, SessionSandbox) says ``SESSION_ONLY =
                True``: registered only through a session, an error through the others.

Through a session. ``Sandbox`` starts ``pysandbox session`` with the same options (``-p`` and
the marker go into a profile written for the run, see session_profile; ``--json`` is implied: a
cell's result is the JSON object), sends the script as one NDJSON request with ``sys.argv`` set
as ``run`` sets it, and closes the session's stdin once the result line is there. The Outcome is
the cell's: ``rc`` its pysandbox_exit_code, ``stdout`` and ``stderr`` what the script wrote (its
``message``, pysandbox's own line, is added to stderr as ``pysandbox: ...``; with ``--json`` in
the options ``stdout`` is the result line itself). The session's framing is judged on every run
(check_behaved): exactly one line on its stdout, the request's id, exit 0. A cell's stdin reads
end of file, so ``hold()`` signals through the sandbox's /tmp instead (see PRELUDE).

Through batch and MCP. The same cell runs in the same warm driver sandboxes, with the same
options and profile on the front's command line. ``pysandbox batch -j 1 -`` gets it as its one
job: the marker as its id, ``args`` the marker and the arguments (the prologue sets only
argv[0]), ``inputs`` what --input named (batch has no such option); its stdin is closed after
the job. ``pysandbox mcp`` gets initialize (protocol 2025-06-18), then
notifications/initialized and one tools/call of run_python, the marker as its id; run_python
takes no argv, so the prologue sets sys.argv as for a session; stdin is closed once the call is
answered. The Outcome is the result object's (for MCP the answer's structuredContent), as for a
session, and the front's framing is judged on every run: batch writes exactly one line, the
job's result with its id, and exits 0; the MCP server writes exactly two JSON-RPC 2.0
messages, the answer to initialize (with the protocol asked for) and the call's (its id, a
result whose structuredContent is valid under the result schema, text content first, isError
exactly when the status is not ok), and exits 0. Both start a warm sandbox beside the one that
runs the script: inspection during the run (Sandbox.procs and all that uses it; the sampler's
peaks are per sandbox, the largest) is of the script's own sandbox, the one whose /tmp holds
the prologue's hold file, while leftovers are looked for among the processes and namespaces of
every sandbox of the run.

The hostile script gets ``PRELUDE`` prepended. It defines MARKER (argv[1], a unique token the
host uses to find every process of the run), ARGS (argv[2:]), ``syscall(nr, ...)`` (raw x86_64
syscall through ctypes, returning the result or -errno), ``attempt(what, fn, ...)`` and
``note(what, result)`` (one ``NOTE {json}`` line per action, for diagnostics), and
``hold(tag)``: print ``READY <tag>`` and block until the host sends a line (or closes stdin), so
the host can inspect the live sandbox at that point (``hold_quiet(tag)`` does the same for a
--json run, whose output the host sees only at the end: it signals with a file in /tmp).

For attacks that need host fixtures there are: ``host_lock`` (serializes tests that change
host-wide network state), ``host_interface`` (a test interface with addresses), ``Listeners``
(logging TCP servers), ``hosts_file_prefix`` (pysandbox in a mount namespace with another
/etc/hosts), ``mount_tmpfs`` (a filesystem of known size), and ``proxy_resolution_attack``, the
shape shared by the attacks on where an allowlisted proxy name may lead.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import pwd
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import traceback
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests"))
import result_schema  # noqa: E402  (tests/result_schema.py: every --json result is checked)
PYSANDBOX = os.environ.get("PYSANDBOX", str(REPO / "build" / "bin" / "pysandbox"))
RUN_AS = os.environ.get("PYSANDBOX_AS", "root") or "root"
VIA = os.environ.get("PYSANDBOX_VIA", "run") or "run"
FRONTS = ("run", "session", "batch", "mcp", "batchfork")
MCP_PROTOCOL = "2025-06-18"

NOBODY = 65534            # the host uid/gid of every sandboxed script, in both modes
SANDBOX_UID = 1000        # what getuid() says inside
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]

# A sanitizer build (ctest sets PYSANDBOX_SANITIZED) starts, runs and exits several times slower:
# time bounds of the tests are multiplied by this (as tests/integration/harness.py does).
TIME_SLACK_SCALE = 4.0 if os.environ.get("PYSANDBOX_SANITIZED") else 1.0

# Exit codes (README.md, "Exit codes").
TIMEOUT = 124
SANDBOX_ERROR = 125


def signalled(sig: int) -> int:
    """The exit code pysandbox reports when the script died of ``sig``."""
    return 128 + int(sig)


# --------------------------------------------------------------------------- verdicts


class Verdict(Exception):
    pass


_cleanups: list = []


def at_cleanup(fn) -> None:
    _cleanups.append(fn)


def _run_cleanups() -> None:
    while _cleanups:
        fn = _cleanups.pop()
        try:
            fn()
        except Exception:
            pass


atexit.register(_run_cleanups)


# Every --json result of the test's runs that does not match the result schema (see
# Sandbox.finish): each one makes the run misbehaved, whatever else the test judged.
_schema_problems: list[str] = []


class Judge:
    """Collects findings; ``done()`` prints the one verdict line and exits."""

    def __init__(self, what: str):
        self.what = what
        self.escapes: list[str] = []
        self.misbehaviour: list[str] = []

    def escape(self, message: str) -> None:
        self.escapes.append(message)

    def misbehaved(self, message: str) -> None:
        self.misbehaviour.append(message)

    def check(self, condition: bool, message: str) -> bool:
        """Record ``message`` as an escape unless ``condition`` holds."""
        if not condition:
            self.escape(message)
        return condition

    @property
    def ok(self) -> bool:
        return not self.escapes and not self.misbehaviour

    def done(self, diagnostics: str = "") -> None:
        _run_cleanups()
        for problem in _schema_problems:
            self.misbehaved(problem)
        _schema_problems.clear()
        if self.ok:
            print(f"contained: {self.what}", flush=True)
            code = 0
        else:
            parts = self.escapes + [f"run misbehaved: {m}" for m in self.misbehaviour]
            print(f"ESCAPED: {self.what}: " + "; ".join(parts), flush=True)
            if diagnostics and os.environ.get("ATTACK_QUIET") != "1":
                print(diagnostics, file=sys.stderr, flush=True)
            code = 1
        sys.stdout.flush()
        os._exit(code)


def main(test) -> None:
    """Run ``test()`` (which ends with ``judge.done()``); anything it raises is a test error."""
    try:
        if os.geteuid() != 0:
            raise Verdict("the attack suite must run as root (PYSANDBOX_AS selects the caller)")
        if RUN_AS not in ("root", "nobody"):
            raise Verdict(f"PYSANDBOX_AS must be root or nobody, not {RUN_AS!r}")
        if VIA not in FRONTS:
            raise Verdict(f"PYSANDBOX_VIA must be one of {', '.join(FRONTS)}, not {VIA!r}")
        run_only = getattr(sys.modules["__main__"], "RUN_ONLY", None)
        if VIA != "run" and run_only:
            raise Verdict(f"this attack is run-only ({run_only}); it has no {VIA} variant")
        if VIA != "session" and getattr(sys.modules["__main__"], "SESSION_ONLY", False):
            raise Verdict("this attack is on sessions themselves: run it with "
                          "PYSANDBOX_VIA=session")
        if not (os.path.isfile(PYSANDBOX) and os.access(PYSANDBOX, os.X_OK)):
            raise Verdict(f"pysandbox binary not found or not executable: {PYSANDBOX}")
        test()
        raise Verdict("the test ended without a verdict (test bug)")
    except Verdict as e:
        _run_cleanups()
        print(f"ERROR: {e}", flush=True)
        os._exit(2)
    except BaseException:
        _run_cleanups()
        traceback.print_exc()
        print("ERROR: the test raised (test bug, see the traceback above)", flush=True)
        os._exit(2)


# --------------------------------------------------------------------------- tokens, files


def new_marker() -> str:
    """A unique token for one run; also a valid module name (a session's preload carries it)."""
    return f"pysandbox_attack_{uuid.uuid4().hex}"


def new_secret(tag: str = "SECRET") -> str:
    return f"{tag}-{uuid.uuid4().hex}"


def _remove(path: str) -> None:
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass


def shared_dir(parent: str = "/tmp", mode: int = 0o755, owner: int | None = None) -> Path:
    """A fresh directory that uid 65534 can read (scripts live here); removed at exit."""
    path = tempfile.mkdtemp(prefix="pysandbox-attack-", dir=parent)
    os.chmod(path, mode)
    if owner is not None:
        os.chown(path, owner, owner)
    at_cleanup(lambda: _remove(path))
    return Path(path)


def private_dir(parent: str = "/tmp") -> Path:
    """A fresh root-only (0700) directory that uid 65534 cannot read; removed at exit."""
    return shared_dir(parent, mode=0o700)


def write_file(path: Path | str, data: str | bytes, mode: int = 0o644,
               owner: int | None = None) -> Path:
    path = Path(path)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    os.chmod(path, mode)
    if owner is not None:
        os.chown(path, owner, owner)
    return path


def canary(directory: Path | str, name: str = "canary.txt", mode: int = 0o644,
           owner: int | None = None) -> tuple[Path, str]:
    """A file holding a fresh secret; returns (path, secret)."""
    secret = new_secret("CANARY")
    path = write_file(Path(directory) / name, f"{secret}\n", mode, owner)
    at_cleanup(lambda: _remove(str(path)))
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
    import hashlib
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


# --------------------------------------------------------------------------- the hostile side

PRELUDE = r'''
import ctypes, errno, json, os, sys
MARKER = sys.argv[1]
ARGS = sys.argv[2:]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def _arg(a):
    return ctypes.c_long(a) if isinstance(a, int) else a

def syscall(nr, *args):
    """Raw x86_64 syscall through libc's syscall(): the result, or -errno."""
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[_arg(a) for a in args])
    return -ctypes.get_errno() if r == -1 else r

def ename(r):
    if isinstance(r, int) and r < 0:
        return errno.errorcode.get(-r, str(-r))
    return "ok: %r" % (r,)

def note(what, result):
    text = ename(result) if isinstance(result, int) else str(result)
    print("NOTE " + json.dumps({"what": what, "result": text}), flush=True)

def attempt(what, fn, *args, **kwargs):
    """Call fn; note 'ok: <result>' or the errno name / exception. Returns result or exception."""
    try:
        r = fn(*args, **kwargs)
        note(what, "ok: %s" % (repr(r)[:300],))
        return r
    except OSError as e:
        note(what, errno.errorcode.get(e.errno, str(e.errno)) if e.errno else repr(e))
        return e
    except Exception as e:
        note(what, "%s: %s" % (type(e).__name__, e))
        return e

# Through a session, batch or MCP the cell's prologue defines _PYSANDBOX_HOLD_SLOT
# (Sandbox.session_cell).
_IN_DRIVER = "_PYSANDBOX_HOLD_SLOT" in globals()

def _driver_fds():
    argv = open("/proc/self/cmdline", "rb").read().split(b"\0")
    return {int(argv[i + 1]) for i in range(len(argv) - 1)
            if (b"pysandbox_driver" in argv[i] or b"pysandbox_zygote" in argv[i])
            and argv[i + 1].isdigit()}

# The cell driver's own descriptors (its channel to the supervisor, as its argv names it: the
# -c code that imports pysandbox_driver, then the fd; in a forked job the command line is its
# zygote's, whose channel number the job's channel takes), which the cell shares: none in a run.
DRIVER_FDS = _driver_fds() if _IN_DRIVER else set()

def _hold_in_session(tag):
    """A cell's stdin reads end of file, and its output reaches the host only at the end: the
    sign is a file /tmp/.hold-<tag> (the empty file the prologue made, renamed: a full /tmp does
    not stop that; a new one once it is used), and the host removes it to say go on
    (Sandbox.go: host root may unlink there, but not create, in the sandbox's user namespace)."""
    import time
    path = "/tmp/.hold-" + tag
    try:
        os.rename(_PYSANDBOX_HOLD_SLOT, path)
    except OSError:
        try:
            open(path, "x").close()
        except OSError as e:
            note("hold " + tag, "cannot signal the host: %r" % (e,))
            return
    while os.path.lexists(path):
        time.sleep(0.02)

def hold(tag="end"):
    """Tell the host to look now, and wait until it says go on (or closes stdin)."""
    print("READY " + tag, flush=True)
    if _IN_DRIVER:
        _hold_in_session(tag)
    else:
        sys.stdin.readline()

def hold_quiet(tag="end"):
    """hold() for a run whose output reaches the host only at the end (--json): the sign is a
    file /tmp/.hold-<tag>, which the host sees through /proc/PID/root (Sandbox.wait_quiet)."""
    if _IN_DRIVER:
        _hold_in_session(tag)
        return
    open("/tmp/.hold-" + tag, "w").close()
    sys.stdin.readline()
'''


_KERNEL_ONLY: dict[str, Path] = {}


def kernel_only_profile(base: str = "default") -> Path:
    """The profile ``base`` (default: the default profile) without its [policy] audit hook. The
    hook lives in the interpreter the script controls (a script can remove it), so the attacks
    are judged against the layers underneath it: kernel isolation, seccomp, Landlock and the
    limits."""
    if base not in _KERNEL_ONLY:
        _KERNEL_ONLY[base] = write_file(shared_dir() / f"kernel-only-{base}.toml",
                                        f'extends = "{base}"\n\n[policy]\ndeny_imports = []\n'
                                        "deny_calls = []\n")
    return _KERNEL_ONLY[base]


_PRELOADS: dict[str, list] = {}


def session_profile(base: str, marker: str) -> Path:
    """For a run through a session, batch or MCP: the profile ``base`` (a name, or a path) with
    ``marker`` added to its [python] preload, so that the marker is on the command lines of the
    sandbox's init and interpreter, where the host looks for the run's processes (the driver's
    argv is "python3 -s -c CODE FD MODULE...", init's "pysandbox-init MODULE..."). The file is
    named after the marker, which puts it on the supervisor's command line too (-p FILE).

    No module of that name exists: the driver's import of it fails, and the first result's
    warnings say so; the import attempt reads nothing but sys.path's directories."""
    if base not in _PRELOADS:
        r = subprocess.run([PYSANDBOX, "profile", "show", base], capture_output=True, text=True)
        if r.returncode != 0:
            raise Verdict(f"pysandbox profile show {base}: {r.stderr.strip()}")
        import tomllib
        _PRELOADS[base] = list(tomllib.loads(r.stdout).get("python", {}).get("preload", []))
    ref = str(Path(base).resolve()) if "/" in base else base
    preload = _PRELOADS[base] + [marker]
    # Not beneath /tmp, /var/tmp or /dev/shm, where attacks look for what the script left
    # (named after the marker).
    return write_file(shared_dir("/run") / f"{marker}.toml",
                      f"extends = {json.dumps(ref)}\n\n[python]\npreload = {json.dumps(preload)}\n")


def script_file(body: str, name: str = "attack.py", directory: Path | None = None) -> Path:
    """PRELUDE + the dedented ``body`` in a fresh directory that uid 65534 can read."""
    directory = directory or shared_dir()
    return write_file(directory / name, PRELUDE + "\n" + textwrap.dedent(body).lstrip())


# --------------------------------------------------------------------------- host /proc


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
    import fcntl
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


def marker_pids(marker: str) -> list[int]:
    """Live host processes (not this one) whose argv carries ``marker``."""
    token = marker.encode()
    me = os.getpid()
    out = []
    for pid in all_pids():
        if pid == me:
            continue
        if any(token in arg for arg in cmdline(pid)):
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


def _net_inodes(pid: int, table: str, column: int) -> set[int]:
    data = read_bytes(f"/proc/{pid}/net/{table}")
    inodes = set()
    for line in (data or b"").decode(errors="replace").splitlines()[1:]:
        cols = line.split()
        if len(cols) > column and cols[column].isdigit():
            inodes.add(int(cols[column]))
    return inodes


def socket_families(pid: int) -> dict[int, str]:
    """fd -> family ('unix', 'inet', 'netlink', 'vsock', 'packet', or a number) of each socket
    the process holds, asked of the socket itself: the host duplicates it with pidfd_getfd()
    and reads SO_DOMAIN."""
    import socket as _socket
    names = {_socket.AF_UNIX: "unix", _socket.AF_INET: "inet", _socket.AF_INET6: "inet6",
             _socket.AF_NETLINK: "netlink", 40: "vsock", 17: "packet"}
    out = {}
    targets = {fd: t for fd, t in fd_targets(pid).items() if t.startswith("socket:")}
    if not targets:
        return out
    pidfd = _libc.syscall(ctypes.c_long(434), ctypes.c_long(pid), ctypes.c_long(0))
    if pidfd < 0:
        raise Verdict(f"pidfd_open({pid}) failed: errno {ctypes.get_errno()}")
    try:
        for fd in targets:
            dup = _libc.syscall(ctypes.c_long(438), ctypes.c_long(pidfd), ctypes.c_long(fd),
                                ctypes.c_long(0))
            if dup < 0:
                continue  # closed meanwhile
            try:
                s = _socket.socket(fileno=dup)
                fam = s.getsockopt(_socket.SOL_SOCKET, 39)  # SO_DOMAIN
                s.detach()
            finally:
                os.close(dup)
            out[fd] = names.get(fam, str(fam))
    finally:
        os.close(pidfd)
    return out


def readable_sockets(pid: int) -> list[int]:
    """The fds of ``pid``'s sockets that have something waiting (a queued connection on a
    listener, a datagram, bytes), asked of the sockets themselves: the host duplicates each with
    pidfd_getfd() and polls it, reading nothing."""
    import select as _select
    targets = [fd for fd, t in fd_targets(pid).items() if t.startswith("socket:")]
    if not targets:
        return []
    pidfd = _libc.syscall(ctypes.c_long(434), ctypes.c_long(pid), ctypes.c_long(0))
    if pidfd < 0:
        raise Verdict(f"pidfd_open({pid}) failed: errno {ctypes.get_errno()}")
    out = []
    try:
        for fd in targets:
            dup = _libc.syscall(ctypes.c_long(438), ctypes.c_long(pidfd), ctypes.c_long(fd),
                                ctypes.c_long(0))
            if dup < 0:
                continue  # closed meanwhile
            try:
                if _select.select([dup], [], [], 0)[0]:
                    out.append(fd)
            finally:
                os.close(dup)
    finally:
        os.close(pidfd)
    return out


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


# --------------------------------------------------------------------------- seccomp filters

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_I386 = 0x40000003
X32_SYSCALL_BIT = 0x40000000

RET_KILL_PROCESS = 0x80000000
RET_KILL_THREAD = 0x00000000
RET_TRAP = 0x00030000
RET_ERRNO = 0x00050000
RET_USER_NOTIF = 0x7FC00000
RET_TRACE = 0x7FF00000
RET_LOG = 0x7FFC0000
RET_ALLOW = 0x7FFF0000
_ACTION_NAMES = {RET_KILL_PROCESS: "KILL_PROCESS", RET_KILL_THREAD: "KILL_THREAD",
                 RET_TRAP: "TRAP", RET_ERRNO: "ERRNO", RET_USER_NOTIF: "USER_NOTIF",
                 RET_TRACE: "TRACE", RET_LOG: "LOG", RET_ALLOW: "ALLOW"}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.restype = ctypes.c_long
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
PTRACE_SECCOMP_GET_FILTER = 0x420C
WALL = 0x40000000


def _ptrace(req: int, pid: int, addr=0, data=None) -> int:
    ctypes.set_errno(0)
    r = _libc.ptrace(req, pid, addr, data)
    if r == -1 and ctypes.get_errno():
        raise OSError(ctypes.get_errno(), f"ptrace({req:#x}, {pid}): "
                      + os.strerror(ctypes.get_errno()))
    return r


def seccomp_filters(pid: int) -> list[list[tuple[int, int, int, int]]]:
    """The classic-BPF seccomp programs the kernel holds for ``pid`` (newest first).

    Host root attaches with PTRACE_SEIZE, interrupts, reads every filter with
    PTRACE_SECCOMP_GET_FILTER and detaches; an empty list means no filter at all.
    """
    _ptrace(PTRACE_SEIZE, pid)
    try:
        _ptrace(PTRACE_INTERRUPT, pid)
        os.waitpid(pid, WALL)
        programs = []
        for index in range(64):
            try:
                count = _ptrace(PTRACE_SECCOMP_GET_FILTER, pid, index, None)
            except OSError as e:
                if e.errno in (2, 22):  # ENOENT: no more filters; EINVAL: not in filter mode
                    break
                raise
            buf = ctypes.create_string_buffer(count * 8)
            _ptrace(PTRACE_SECCOMP_GET_FILTER, pid, index, ctypes.cast(buf, ctypes.c_void_p))
            programs.append([struct.unpack_from("<HBBI", buf.raw, i * 8) for i in range(count)])
        return programs
    finally:
        try:
            _ptrace(PTRACE_DETACH, pid, 0, None)
        except OSError:
            pass


def run_bpf(program, data: bytes) -> int:
    """A classic-BPF interpreter, enough for seccomp filters (what the kernel accepts)."""
    A = X = 0
    mem = [0] * 16
    pc = 0
    M32 = 0xFFFFFFFF
    for _ in range(100000):
        code, jt, jf, k = program[pc]
        pc += 1
        cls = code & 0x07
        if cls == 0x00:  # LD
            mode = code & 0xE0
            if mode == 0x20:
                A = struct.unpack_from("<I", data, k)[0]
            elif mode == 0x00:
                A = k
            elif mode == 0x60:
                A = mem[k]
            elif mode == 0x80:
                A = len(data)
            else:
                raise ValueError(f"unsupported BPF load {code:#x}")
        elif cls == 0x01:  # LDX
            mode = code & 0xE0
            X = k if mode == 0x00 else mem[k] if mode == 0x60 else len(data) if mode == 0x80 \
                else None
            if X is None:
                raise ValueError(f"unsupported BPF ldx {code:#x}")
        elif cls == 0x02:
            mem[k] = A
        elif cls == 0x03:
            mem[k] = X
        elif cls == 0x04:  # ALU
            op = code & 0xF0
            src = X if code & 0x08 else k
            if op == 0x00: A = (A + src) & M32
            elif op == 0x10: A = (A - src) & M32
            elif op == 0x20: A = (A * src) & M32
            elif op == 0x30: A = A // src if src else 0
            elif op == 0x40: A |= src
            elif op == 0x50: A &= src
            elif op == 0x60: A = (A << src) & M32
            elif op == 0x70: A >>= src
            elif op == 0x80: A = (-A) & M32
            elif op == 0x90: A = A % src if src else 0
            elif op == 0xA0: A ^= src
            else: raise ValueError(f"unsupported BPF alu {code:#x}")
        elif cls == 0x05:  # JMP
            op = code & 0xF0
            src = X if code & 0x08 else k
            if op == 0x00:
                pc += k
                continue
            taken = {0x10: A == src, 0x20: A > src, 0x30: A >= src, 0x40: bool(A & src)}[op]
            pc += jt if taken else jf
        elif cls == 0x06:  # RET
            return (A if code & 0x18 == 0x10 else k) & M32
        elif cls == 0x07:
            if code & 0xF8 == 0x00: X = A
            else: A = X
    raise ValueError("BPF program did not return")


def seccomp_data(nr: int, arch: int = AUDIT_ARCH_X86_64, args=(), ip: int = 0x401000) -> bytes:
    a = [int(x) & 0xFFFFFFFFFFFFFFFF for x in args] + [0] * (6 - len(args))
    return struct.pack("<iIQ6Q", nr if nr < 2**31 else nr - 2**32, arch, ip, *a)


def _action(ret: int) -> int:
    return ret & 0xFFFF0000


def _signed(action: int) -> int:
    return action - 2**32 if action & 0x80000000 else action


def verdict(filters, nr: int, arch: int = AUDIT_ARCH_X86_64, args=()) -> int:
    """What the kernel would do for this syscall: the most restrictive action of all filters."""
    data = seccomp_data(nr, arch, args)
    result = RET_ALLOW
    for program in filters:
        ret = run_bpf(program, data)
        if _signed(_action(ret)) < _signed(_action(result)):
            result = ret
    return result


def action_name(ret: int) -> str:
    name = _ACTION_NAMES.get(_action(ret), hex(ret))
    return f"ERRNO({ret & 0xFFFF})" if _action(ret) == RET_ERRNO else name


def denies(ret: int) -> bool:
    """The call never reaches the kernel's implementation: ERRNO, kill, trap, TRACE with no
    tracer (ENOSYS), or USER_NOTIF: pysandbox's supervisor holds the listener and answers every
    notification with an error (never SECCOMP_USER_NOTIF_FLAG_CONTINUE). That last one holds
    only while no process of the run can answer for itself: Sandbox.filters() checks, from the
    host, that none of them holds the listener fd."""
    return _action(ret) in (RET_KILL_PROCESS, RET_KILL_THREAD, RET_TRAP, RET_ERRNO, RET_TRACE,
                            RET_USER_NOTIF)


def check_filter_denies(judge: Judge, filters, cases, label: str = "") -> None:
    """``cases``: (description, nr, arch, args). Each must be denied by the filter; two calls
    that must work (read on x86_64, a thread clone) must be allowed, or the evaluation is
    suspect (a test bug, reported as an error)."""
    for sane_nr, sane_args, what in ((0, (0, 0, 0), "read"),
                                     (56, (0x3D0F00,), "clone(CLONE_VM|..|CLONE_THREAD)")):
        if filters and not verdict(filters, sane_nr, AUDIT_ARCH_X86_64, sane_args) == RET_ALLOW:
            raise Verdict(f"the filter evaluation denies {what}: evaluator or test bug")
    if not filters:
        judge.escape(f"no seccomp filter on the sandboxed process{label}, so nothing denies "
                     + ", ".join(c[0] for c in cases))
        return
    for holder in getattr(filters, "listener_holders", ()):
        judge.escape(f"{holder} holds the seccomp notification listener, so it can answer its "
                     f"own denied calls (USER_NOTIF) with 'continue'")
    allowed = []
    for what, nr, arch, args in cases:
        ret = verdict(filters, nr, arch, args)
        if not denies(ret):
            allowed.append(f"{what} -> {action_name(ret)}")
    if allowed:
        judge.escape("the seccomp filter lets through: " + ", ".join(allowed))


# --------------------------------------------------------------------------- running


class _Filters(list):
    def __init__(self, programs):
        super().__init__(programs)
        self.listener_holders: list[str] = []


class Outcome:
    def __init__(self, rc, stdout: bytes, stderr: bytes, elapsed: float, host_timeout: bool):
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.elapsed = elapsed
        self.host_timeout = host_timeout
        # Through a session, batch or MCP (``via``): the result object of the cell, job or call,
        # and what was wrong with the front's own conduct (its framing, its exit), as (kind,
        # message), kind "escape" or "misbehaved".
        self.via = "run"
        self.cell: dict | None = None
        self.front_problems: list[tuple[str, str]] = []
        self.front_output = b""  # all the front wrote, its result included

    @property
    def output(self) -> bytes:
        """Everything that reached the caller (through a session, batch or MCP, the whole
        result too: the value of a final expression, warnings, MCP's text content, ...)."""
        return self.stdout + b"\n" + self.stderr + b"\n" + self.front_output

    def schema_problem(self) -> str | None:
        """Why stdout is not one --json result valid under the result schema, or None."""
        try:
            result_schema.parse_result(self.stdout)
        except result_schema.SchemaError as e:
            return str(e)
        return None

    def result(self) -> dict | None:
        """The --json result pysandbox printed (one JSON object), or None if there is none.
        Whether it matches the schema is judged once for every run (Sandbox.finish)."""
        if not hasattr(self, "_result"):
            self._result = None
            text = self.stdout.strip()
            if text.startswith(b"{") and len(text) < (256 << 20):
                try:
                    value = json.loads(text)
                    if isinstance(value, dict) and \
                            str(value.get("schema", "")).startswith("pysandbox.result"):
                        self._result = value
                except ValueError:
                    pass
        return self._result

    def script_stdout(self) -> bytes:
        """What the script wrote to stdout: pysandbox's stdout, or the result's ``stdout`` with
        --json (decoded when the result says it is base64)."""
        r = self.result()
        if r is None or not isinstance(r.get("stdout"), str):
            return self.stdout
        encoding = r.get("encoding")
        if isinstance(encoding, dict) and encoding.get("stdout") == "base64":
            import base64
            try:
                return base64.b64decode(r["stdout"])
            except ValueError:
                return b""
        return r["stdout"].encode("utf-8", "surrogateescape")

    def notes(self) -> list[dict]:
        out = []
        for line in self.script_stdout().splitlines():
            if line.startswith(b"NOTE "):
                try:
                    out.append(json.loads(line[5:]))
                except ValueError:
                    pass
        return out

    def note(self, what: str) -> str | None:
        """The result the script noted for ``what`` (last one), or None if it never got there."""
        found = None
        for n in self.notes():
            if n.get("what") == what:
                found = n.get("result")
        return found

    def succeeded(self, prefix: str) -> list[str]:
        """The noted actions starting with ``prefix`` that the script says succeeded."""
        return [n["what"] for n in self.notes()
                if n.get("what", "").startswith(prefix) and str(n.get("result")).startswith("ok")]

    def describe(self) -> str:
        def clip(b: bytes) -> str:
            t = b.decode("utf-8", "replace")
            return t if len(t) <= 3000 else t[:1500] + "\n[...]\n" + t[-1500:]
        via = ""
        if self.cell is not None:
            via = (f", through {self.via}: status {self.cell.get('status')!r}, state "
                   f"{self.cell.get('state')!r}, warnings {self.cell.get('warnings')!r}")
        return (f"--- exit {self.rc}, {self.elapsed:.2f}s, host timeout {self.host_timeout}{via}\n"
                f"--- stdout\n{clip(self.stdout)}\n--- stderr\n{clip(self.stderr)}")


class _Reader(threading.Thread):
    """Drains one pipe, keeping at most ``keep`` bytes (and counting all)."""

    def __init__(self, f, keep: int):
        super().__init__(daemon=True)
        self.f = f
        self.keep = keep
        self.data = bytearray()
        self.total = 0
        self.lines = 0  # newlines seen, kept or not
        self.lock = threading.Condition()

    def run(self) -> None:
        fd = self.f.fileno()
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            with self.lock:
                if not chunk:
                    self.lock.notify_all()
                    return
                self.total += len(chunk)
                self.lines += chunk.count(b"\n")
                room = self.keep - len(self.data)
                if room > 0:
                    self.data += chunk[:room]
                self.lock.notify_all()


class Sampler(threading.Thread):
    """Watches the run's processes from the host while it lasts: peaks and namespaces.

    ``by_sandbox`` (batch, MCP: a warm sandbox runs beside the script's): the peaks are of one
    sandbox at a time (sandbox_of), the largest of them; the namespaces are all of them."""

    def __init__(self, marker: str, interval: float = 0.02, by_sandbox: bool = False,
                 fork: bool = False):
        super().__init__(daemon=True)
        self.marker = marker
        self.by_sandbox = by_sandbox
        self.fork = fork
        self.interval = interval
        self.stop = threading.Event()
        self.peak_procs = 0
        self.peak_tasks = 0
        self.peak_rss_kib = 0
        self.peak_hwm_kib = 0
        self.pid_namespaces: set[str] = set()
        self.user_namespaces: set[str] = set()
        self.held: dict[str, int] = {}  # namespace link -> an fd keeping it (and its id) alive
        self.seen: set[int] = set()
        self.driver_fds: set[int] = set()  # the driver's: "-c CODE FD ..." in argv (PRELUDE)
        self.lock = threading.Lock()

    def release(self) -> None:
        """Drop the namespace references (after the leftover check)."""
        with self.lock:
            for fd in self.held.values():
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.held.clear()
            self.pid_namespaces.clear()
            self.user_namespaces.clear()

    def sample(self) -> None:
        with self.lock:
            self._sample()

    def _sample(self) -> None:
        pids = marker_pids(self.marker)
        counts: dict[str | None, list[int]] = {}  # sandbox -> [processes, tasks, rss]
        for pid in pids:
            st = status(pid)
            if not st:
                continue
            nspid = st.get("NSpid", "").split()
            if len(nspid) < 2:
                continue  # the supervisor (and setpriv): host side
            # Namespace ids (inode numbers) are recycled as soon as a namespace dies, so one
            # is only this run's while the test holds a reference to it: open it, then check
            # that the pid still carries the marker (pids are recycled too, fast under a fork
            # bomb). Otherwise another run's processes would be taken for this run's leftovers.
            opened = {}
            for kind in ("pid", "user"):
                link = readlink(f"/proc/{pid}/ns/{kind}")
                if link and link not in self.held:
                    try:
                        opened[link] = os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY)
                    except OSError:
                        pass
            argv = cmdline(pid)
            if not any(self.marker.encode() in arg for arg in argv):
                for fd in opened.values():
                    os.close(fd)
                continue
            for i, arg in enumerate(argv[:-1]):
                if b"pysandbox_driver" in arg and argv[i + 1].isdigit():
                    self.driver_fds.add(int(argv[i + 1]))
            for link, fd in opened.items():
                if readlink(f"/proc/self/fd/{fd}") == link:
                    self.held[link] = fd
                    (self.pid_namespaces if link.startswith("pid:") else
                     self.user_namespaces).add(link)
                else:
                    os.close(fd)
            depth = sandbox_depth(nspid, self.fork)
            key = (sandbox_of(pid, depth) if depth >= 1 else "zygote") if self.by_sandbox else None
            count = counts.setdefault(key, [0, 0, 0])
            count[0] += 1
            self.seen.add(pid)
            count[1] += int(st.get("Threads", "1") or 1)
            count[2] += int(st.get("VmRSS", "0 kB").split()[0] or 0)
            self.peak_hwm_kib = max(self.peak_hwm_kib,
                                    int(st.get("VmHWM", "0 kB").split()[0] or 0))
        for procs, tasks, rss in counts.values():
            self.peak_procs = max(self.peak_procs, procs)
            self.peak_tasks = max(self.peak_tasks, tasks)
            self.peak_rss_kib = max(self.peak_rss_kib, rss)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.sample()
            except Exception:
                pass
            self.stop.wait(self.interval)


def _host_ns(kind: str) -> str:
    return readlink(f"/proc/1/ns/{kind}")


def leftovers(marker: str, pid_namespaces=(), user_namespaces=()) -> list[int]:
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


# Options of `run` that a session, batch and MCP do not have: an attack that needs one is
# RUN_ONLY.
_RUN_ONLY_OPTIONS = ("--workdir", "-c", "-")

# Where a cell (session, batch, MCP) signals hold() (PRELUDE): the slot, renamed to
# /tmp/.hold-TAG.
_HOLD_SLOT = "/tmp/.pysandbox-hold"

# The JSON-RPC id of an MCP client's initialize (its call's is the marker).
_MCP_INIT_ID = 1


def _split_option(options, long: str, short: str = "") -> tuple[list[str], list]:
    """(the values of the option ``long`` (or ``short``), in order, the other options)."""
    values, rest = [], []
    items = [str(o) for o in options]
    i = 0
    while i < len(items):
        o = items[i]
        if o in (long, short) and i + 1 < len(items):
            values.append(items[i + 1])
            i += 2
            continue
        if o.startswith(long + "="):
            values.append(o.split("=", 1)[1])
        else:
            rest.append(o)
        i += 1
    return values, rest


def _split_profile(options) -> tuple[str | None, list]:
    """(the profile named by -p/--profile, the other options)."""
    chosen, rest = _split_option(options, "--profile", "-p")
    return (chosen[-1] if chosen else None), rest


def _check_session_schema(stdout: bytes, via: str = "session") -> None:
    """Every line a session (or batch) wrote must be valid under the result schema, as a --json
    result."""
    if not stdout.strip():
        return
    try:
        result_schema.parse_lines(stdout)
    except result_schema.SchemaError as e:
        _schema_problems.append(f"a line of the {via} breaks the schema: "
                                + str(e).replace("\n", " "))


def _stream(result: dict, name: str) -> bytes:
    """A result's ``stdout`` or ``stderr``, decoded as its ``encoding`` says."""
    text = result.get(name)
    if not isinstance(text, str):
        return b""
    encoding = result.get("encoding")
    if isinstance(encoding, dict) and encoding.get(name) == "base64":
        import base64
        try:
            return base64.b64decode(text)
        except ValueError:
            return b""
    return text.encode("utf-8", "surrogateescape")


def _has_hold_file(pid: int) -> bool:
    """The /tmp that ``pid`` sees holds the cell prologue's hold slot, or a hold() sign."""
    try:
        names = os.listdir(f"/proc/{pid}/root/tmp")
    except OSError:
        return False
    return any(n == os.path.basename(_HOLD_SLOT) or n.startswith(".hold-") for n in names)


class Sandbox:
    """One pysandbox run of a hostile script, watched from the host.

    ``with Sandbox(body, ...) as sb:`` starts it; ``sb.wait_ready(tag)`` waits for the script's
    ``hold(tag)``; ``sb.go()`` lets it continue; ``sb.finish()`` closes its stdin and collects
    the outcome (idempotent, also done on leaving the block). ``Sandbox(...).run()`` does it all
    for a script that does not hold.

    Through a session (PYSANDBOX_VIA=session) the script is the one cell of a ``pysandbox
    session``, through batch and MCP the one job or call (see the module's docstring). When the
    caller gives a terminal as stdin, the session is its REPL: pass the pty's master as
    ``terminal``, and the cell is typed there as one line (a session's only).
    """

    def __init__(self, body: str | None = None, args=(), *, options=(), timeout: str = "5s",
                 host_timeout: float | None = None, env: dict | None = None, pass_fds=(),
                 stdin=None, stdout=None, stderr=None, preexec_fn=None, binary: str | None = None,
                 script: Path | None = None, keep: int = 64 << 20, marker: str | None = None,
                 as_nobody: bool | None = None, sample: bool = True, prefix=(),
                 terminal: int | None = None, via: str | None = None):
        self.marker = marker or new_marker()
        self.script = script if script is not None else script_file(body or "")
        self.args = [str(a) for a in args]
        self.binary = binary or PYSANDBOX
        seconds = _parse_duration(timeout) if timeout else 5.0
        self.host_timeout = host_timeout if host_timeout is not None else seconds + 5.0
        nobody = RUN_AS == "nobody" if as_nobody is None else as_nobody
        self.via = via or VIA
        # batch --fork is batch to everything here but its command line and the prologue.
        self.fork = self.via == "batchfork"
        if self.fork:
            self.via = "batch"
        self.terminal = terminal
        self.json = False
        self.inputs: list[str] = []
        chosen, rest = _split_profile(options)
        if self.via != "run":
            self.json = "--json" in rest
            rest = [o for o in rest if o != "--json"]
            for o in rest:
                if o in _RUN_ONLY_OPTIONS or o.startswith("--workdir="):
                    raise Verdict(f"{o} is an option of run only: declare the attack RUN_ONLY")
            if terminal is not None and self.via != "session":
                raise Verdict(f"only a session has a terminal REPL, not {self.via}")
            if self.via == "batch":  # a job's "inputs"
                self.inputs, rest = _split_option(rest, "--input")
            profile = session_profile(chosen or str(kernel_only_profile()), self.marker)
            limit = ["--timeout", timeout] if timeout else []
            # batch: one job at a time, so one sandbox runs it and one more is started ahead.
            command = {"session": ["session", "-p", str(profile), *rest, *limit],
                       "batch": ["batch", "-j", "1", *(["--fork"] if self.fork else []),
                                 "-p", str(profile), *rest, *limit, "-"],
                       "mcp": ["mcp", "-p", str(profile), *rest, *limit]}[self.via]
        else:
            profile = ["-p", chosen] if chosen else ["-p", str(kernel_only_profile())]
            run_opts = profile + rest + (["--timeout", timeout] if timeout else [])
            command = ["run", *run_opts, str(self.script), "--", self.marker, *self.args]
        # ``prefix``: a command that runs first (as root) and execs the rest, e.g. to give
        # pysandbox a private mount namespace with another /etc/hosts (hosts_file_prefix).
        self.argv = list(prefix) + (AS_NOBODY if nobody else []) + [self.binary, *command]
        self.wants_result = self.via == "run" and "--json" in rest
        self.env = env
        self.pass_fds = tuple(pass_fds)
        self.stdin_spec = stdin
        self.stdout_spec = stdout
        self.stderr_spec = stderr
        self.preexec_fn = preexec_fn
        self.keep = keep
        self.proc: subprocess.Popen | None = None
        self.outcome: Outcome | None = None
        self.sampler = Sampler(self.marker, by_sandbox=self.via in ("batch", "mcp"),
                               fork=self.fork) \
            if sample else None
        self.start_time = 0.0
        self._filters = None
        self._readers: list[_Reader] = []
        self._stdin_lock = threading.Lock()
        self._releaser: threading.Thread | None = None
        self._sent = threading.Event()  # MCP: the call is written (stdin may close after it)
        self._own: str | None = None  # batch, MCP: the script's sandbox (sandbox_of), once seen

    # -- through a session, batch or MCP

    def session_cell(self) -> str:
        """The script as a cell: a prologue sets sys.argv as ``run`` would (argv[0] the file the
        interpreter runs, the driver's; then the marker and the arguments, which a batch job
        has from its "args") and makes the file hold() renames (PRELUDE)."""
        argv = [self.marker, *self.args]
        driver_file = "_pysandbox_sys.modules['pysandbox_driver'].DRIVER_FILE"
        return ("import sys as _pysandbox_sys\n"
                + (f"_pysandbox_sys.argv[0] = {driver_file}\n" if self.via == "batch" else
                   f"_pysandbox_sys.argv = [{driver_file}, *{argv!r}]\n")
                + "del _pysandbox_sys\n"
                f"_PYSANDBOX_HOLD_SLOT = {_HOLD_SLOT!r}\n"
                "open(_PYSANDBOX_HOLD_SLOT, 'x').close()\n"
                + self.script.read_text())

    def _send_cell(self) -> None:
        code = self.session_cell()
        if self.terminal is not None:
            # The REPL takes a line as a cell; a terminal's line holds at most 4095 bytes.
            import base64
            import zlib
            packed = base64.b64encode(zlib.compress(code.encode(), 9)).decode()
            line = ("exec(__import__('zlib').decompress(__import__('base64').b64decode('"
                    + packed + "')).decode())\n")
            if len(line) >= 4095:
                raise Verdict(f"the cell is too long for one terminal line ({len(line)} bytes)")
            os.write(self.terminal, line.encode())
            return
        if self.via == "mcp":
            threading.Thread(target=self._mcp_client, args=(code,), daemon=True).start()
            return
        if self.via == "batch":
            job = {"id": self.marker, "code": code, "args": [self.marker, *self.args]}
            if self.inputs:
                job["inputs"] = self.inputs
            self._write(job)
            self._close_stdin()  # one job: the batch ends when it has its result
            return
        self._write({"id": self.marker, "code": code})
        threading.Thread(target=self._close_after_result, daemon=True).start()

    def _write(self, message: dict) -> None:
        """One JSON line on pysandbox's stdin."""
        with self._stdin_lock:
            try:
                self.proc.stdin.write((json.dumps(message) + "\n").encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError, AttributeError):
                pass  # pysandbox is gone already (or stdin closed): the outcome says why

    def _wait_lines(self, count: int) -> None:
        """Until pysandbox wrote ``count`` lines on its stdout, or it closed it."""
        reader = self._readers[0]
        with reader.lock:
            while reader.lines < count and reader.is_alive():
                reader.lock.wait(0.1)

    def _mcp_client(self, code: str) -> None:
        """An MCP client's side of one call: initialize, and once it is answered,
        notifications/initialized and the tools/call; stdin is closed once the call is answered
        (the server then ends)."""
        try:
            self._write({"jsonrpc": "2.0", "id": _MCP_INIT_ID, "method": "initialize",
                         "params": {"protocolVersion": MCP_PROTOCOL, "capabilities": {},
                                    "clientInfo": {"name": "pysandbox-attack", "version": "1"}}})
            self._wait_lines(1)
            self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})
            self._write({"jsonrpc": "2.0", "id": self.marker, "method": "tools/call",
                         "params": {"name": "run_python", "arguments": {"code": code}}})
        finally:
            self._sent.set()
        self._wait_lines(2)
        self._close_stdin()

    def _close_stdin(self) -> None:
        with self._stdin_lock:
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass

    def _close_after_result(self) -> None:
        """One request, one result: once its line is there the session's stdin is closed, and
        the session ends as a run ends when its script does."""
        self._wait_lines(1)
        self._close_stdin()

    def _result_seen(self) -> bool:
        """Through a session (NDJSON), batch or MCP: the result is there, so no hold() is to
        come (MCP: the second line, after initialize's answer)."""
        return (self.via != "run" and self.terminal is None and bool(self._readers)
                and self._readers[0].lines >= (2 if self.via == "mcp" else 1))

    def _held(self, tag: str) -> bool:
        for p in self.inside():
            if p.is_python and os.path.lexists(f"/proc/{p.pid}/root/tmp/.hold-{tag}"):
                return True
        return False

    def _release_holds(self) -> None:
        """Remove every /tmp/.hold-TAG of the run: hold() returns."""
        for p in self.inside():
            if not p.is_python:
                continue
            tmp = f"/proc/{p.pid}/root/tmp"
            try:
                names = os.listdir(tmp)
            except OSError:
                continue
            for name in names:
                if name.startswith(".hold-"):
                    try:
                        os.unlink(f"{tmp}/{name}")
                    except OSError:
                        pass

    def _release_until_exit(self) -> None:
        while self.proc.poll() is None:
            try:
                self._release_holds()
            except Exception:
                pass
            time.sleep(0.05)

    def _front_outcome(self, o: Outcome) -> None:
        """The result object (a cell's, a job's, a call's) as the run's outcome; the front's
        framing and exit judged."""
        front_rc = o.rc
        raw_out, raw_err = o.stdout, o.stderr
        o.front_output = raw_out + b"\n" + raw_err
        reader = self._readers[0]
        lines = [l for l in raw_out.split(b"\n") if l.strip()]
        problems = o.front_problems
        if reader.total > len(reader.data):
            problems.append(("misbehaved", f"the {self.via} wrote {reader.total} bytes on stdout, "
                             f"more than the {self.keep} the test keeps"))
        found = self._mcp_answer(lines, front_rc, problems) if self.via == "mcp" else \
            self._result_line(raw_out, lines, front_rc, problems)
        if found is None:
            return  # pysandbox failed or died: its exit code stands, as for run
        r, line = found
        o.cell = r
        if front_rc != 0:
            problems.append(("misbehaved", f"the {self.via} exited {front_rc} after the result"))
        code = r.get("pysandbox_exit_code")
        if not isinstance(code, int) or isinstance(code, bool):
            problems.append(("misbehaved", f"the result's pysandbox_exit_code is {code!r}"))
        else:
            o.rc = code
        message = r.get("message")
        said = f"pysandbox: {message}\n".encode() if isinstance(message, str) and message else b""
        o.stdout = line if self.json else _stream(r, "stdout")
        o.stderr = _stream(r, "stderr") + said + raw_err

    def _result_line(self, raw_out: bytes, lines: list[bytes], front_rc,
                     problems: list) -> tuple[dict, bytes] | None:
        """A session's or a batch's one result line, parsed, with the line itself; None when
        there is none."""
        _check_session_schema(raw_out, self.via)
        reader = self._readers[0]
        if reader.lines > 1 or len(lines) > 1:
            asked = "request" if self.via == "session" else "job"
            problems.append(("escape", f"the {self.via} wrote {max(reader.lines, len(lines))} "
                             f"lines on its stdout for one {asked}: its framing is broken"))
        if not lines:
            if front_rc == 0:
                problems.append(("misbehaved", f"the {self.via} ended (exit 0) without a result"))
            return None
        try:
            r = json.loads(lines[0])
        except ValueError as e:
            problems.append(("misbehaved", f"the {self.via}'s result line does not parse: {e}"))
            return None
        if not isinstance(r, dict):
            problems.append(("misbehaved", f"the {self.via}'s result line is not a JSON object"))
            return None
        if r.get("id") != self.marker or (self.via == "session" and r.get("cell") != 1):
            problems.append(("escape", f"the result line is not the request's: id {r.get('id')!r}"
                             f", cell {r.get('cell')!r}"))
        return r, lines[0]

    def _mcp_answer(self, lines: list[bytes], front_rc,
                    problems: list) -> tuple[dict, bytes] | None:
        """The MCP server's answer to the call: its structuredContent, and that as one JSON line
        (what --json prints); None when there is none. The server's messages judged: JSON-RPC
        2.0, exactly the answer to initialize and the call's."""
        messages = []
        for number, line in enumerate(lines, 1):
            try:
                message = json.loads(line)
            except ValueError as e:
                problems.append(("misbehaved", f"MCP message {number} does not parse: {e}"))
                return None
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                problems.append(("misbehaved", f"MCP message {number} is not JSON-RPC 2.0: "
                                 f"{line[:200]!r}"))
                return None
            messages.append(message)
        reader = self._readers[0]
        if reader.lines > 2 or len(messages) > 2:
            problems.append(("escape", f"the MCP server wrote {max(reader.lines, len(messages))} "
                             "lines on its stdout for initialize and one call: its framing is "
                             "broken"))
        if not messages:
            if front_rc == 0:
                problems.append(("misbehaved", "the MCP server ended (exit 0) without answering "
                                 "initialize"))
            return None
        init = messages[0].get("result")
        if messages[0].get("id") != _MCP_INIT_ID or not isinstance(init, dict) or \
                init.get("protocolVersion") != MCP_PROTOCOL:
            problems.append(("misbehaved", "the first message is not the answer to initialize "
                             f"({MCP_PROTOCOL}): {str(messages[0])[:300]}"))
        if len(messages) < 2:
            if front_rc == 0:
                problems.append(("misbehaved", "the MCP server ended (exit 0) without answering "
                                 "the call"))
            return None
        answer = messages[1]
        if answer.get("id") != self.marker:
            problems.append(("escape", f"the second message is not the call's answer: id "
                             f"{answer.get('id')!r}"))
        result = answer.get("result")
        r = result.get("structuredContent") if isinstance(result, dict) else None
        if not isinstance(r, dict):
            problems.append(("misbehaved", "the call was answered without a result object: "
                             f"{str(answer)[:300]}"))
            return None
        try:
            result_schema.validate(r)
        except result_schema.SchemaError as e:
            _schema_problems.append("the call's structuredContent breaks the schema: "
                                    + str(e).replace("\n", " "))
        content = result.get("content")
        if not isinstance(content, list) or not content or not isinstance(content[0], dict) \
                or content[0].get("type") != "text":
            problems.append(("misbehaved", "the call's answer does not begin with text content"))
        if result.get("isError") is not (r.get("status") != "ok"):
            problems.append(("misbehaved", f"the call's isError is {result.get('isError')!r} for "
                             f"status {r.get('status')!r}"))
        return r, json.dumps(r, ensure_ascii=False).encode("utf-8", "surrogatepass")

    def driver_fds(self) -> set[int]:
        """The descriptors the cell driver itself holds in the interpreter (its control channel,
        as its argv gives it; seen by the sampler): a cell sees them. None through run."""
        return set(self.sampler.driver_fds) if self.sampler else set()

    def artifact_dir(self, output_dir: Path | str) -> Path:
        """Where the artifacts of --output-dir DIR land: DIR for run, DIR/cell-1 for the one
        cell of a session, DIR/job-1 for a batch's one job, DIR/call-1 for MCP's one call."""
        below = {"session": "cell-1", "batch": "job-1", "mcp": "call-1"}.get(self.via)
        return Path(output_dir) / below if below else Path(output_dir)

    # -- lifecycle

    def start(self) -> "Sandbox":
        self.start_time = time.monotonic()
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE if self.stdin_spec is None else self.stdin_spec,
            stdout=subprocess.PIPE if self.stdout_spec is None else self.stdout_spec,
            stderr=subprocess.PIPE if self.stderr_spec is None else self.stderr_spec,
            pass_fds=self.pass_fds, env=self.env, cwd="/", preexec_fn=self.preexec_fn)
        at_cleanup(self._kill_everything)
        if self.proc.stdout is not None:
            self._readers.append(_Reader(self.proc.stdout, self.keep))
        if self.proc.stderr is not None:
            self._readers.append(_Reader(self.proc.stderr, self.keep))
        for r in self._readers:
            r.start()
        if self.sampler:
            self.sampler.start()
        if self.via != "run":
            self._send_cell()
        return self

    def __enter__(self) -> "Sandbox":
        return self.start()

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.finish()
        else:
            self._kill_everything()

    def run(self) -> Outcome:
        self.start()
        return self.finish()

    def stdout_so_far(self) -> bytes:
        return bytes(self._readers[0].data) if self._readers else b""

    def wait_ready(self, tag: str = "end", timeout: float | None = None) -> bool:
        """Wait for ``READY <tag>`` from the script. False if it exited or took too long."""
        if self.via != "run":
            return self.wait_quiet(tag, timeout)
        token = f"READY {tag}\n".encode()
        deadline = self.start_time + self.host_timeout if timeout is None \
            else time.monotonic() + timeout
        reader = self._readers[0]
        with reader.lock:
            while token not in reader.data:
                if not reader.is_alive():
                    return False
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                reader.lock.wait(min(remaining, 0.1))
        return True

    def wait_quiet(self, tag: str = "end", timeout: float | None = None) -> bool:
        """Wait for the script's ``hold_quiet(tag)`` (its /tmp/.hold-<tag>, seen from the host
        through /proc/PID/root). False if pysandbox exited or it took too long."""
        deadline = self.start_time + self.host_timeout if timeout is None \
            else time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None or self._result_seen():
                return False
            if self._held(tag):
                return True
            time.sleep(0.05)
        return False

    def supervisor(self) -> Proc | None:
        """pysandbox itself, on the host side (not in the sandbox's PID namespace)."""
        binary = os.path.realpath(self.binary)
        for p in self.procs():
            if not p.inside and os.path.realpath(p.exe) == binary:
                return p
        return None

    def go(self) -> None:
        if self.via != "run":
            self._release_holds()
            return
        if self.terminal is not None:
            os.write(self.terminal, b"go\n")
            return
        try:
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def finish(self) -> Outcome:
        if self.outcome is not None:
            return self.outcome
        if self.via != "run" and self._releaser is None:
            # As closing a run's stdin ends every hold() to come.
            self._releaser = threading.Thread(target=self._release_until_exit, daemon=True)
            self._releaser.start()
            if self.terminal is not None:
                try:
                    os.write(self.terminal, b"\n\x04")  # end of input: the REPL ends
                except OSError:
                    pass
        deadline = self.start_time + self.host_timeout
        if self.via == "mcp":  # closed before the call is written, stdin would end the server
            self._sent.wait(max(0.1, deadline - time.monotonic()))
        self._close_stdin()
        host_timeout = False
        try:
            self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            host_timeout = True
            self._kill_everything()
        for r in self._readers:
            r.join(timeout=3)
            if r.is_alive():  # something that outlived pysandbox holds the pipe
                host_timeout = True
                self._kill_everything()
                r.join(timeout=3)
        if self.sampler:
            self.sampler.stop.set()
            self.sampler.join()
        elapsed = time.monotonic() - self.start_time
        out = bytes(self._readers[0].data) if self._readers else b""
        err = bytes(self._readers[1].data) if len(self._readers) > 1 else b""
        self.outcome = Outcome(self.proc.returncode, out, err, elapsed, host_timeout)
        self.outcome.via = self.via
        # A --json run that pysandbox finished (not one the test killed) owes one valid result.
        if self.wants_result and not host_timeout and (self.proc.returncode or 0) >= 0:
            if problem := self.outcome.schema_problem():
                _schema_problems.append("the --json result breaks the schema: "
                                        + problem.replace("\n", " "))
        if self.via != "run" and self.terminal is None and self._readers and \
                self.outcome.rc is not None and self.outcome.rc >= 0 and not host_timeout:
            self._front_outcome(self.outcome)
        return self.outcome

    def _kill_everything(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.kill()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        kill_pids(self.leftovers())
        if self.sampler:
            self.sampler.release()

    # -- inspection

    def procs(self) -> list[Proc]:
        """The run's processes: pysandbox on the host side, and those inside; through batch and
        MCP those of the script's sandbox once it is known (_own_sandbox), not the warm one."""
        out = []
        token = self.marker.encode()
        for pid in marker_pids(self.marker):
            p = Proc(pid)
            # Proc reads the cmdline last: a reused pid shows up without the marker.
            if p.status and any(token in arg for arg in p.cmdline):
                out.append(p)
        if self.via in ("batch", "mcp") and self._own_sandbox(out):
            out = [p for p in out
                   if not p.inside or
                   sandbox_of(p.pid, sandbox_depth(p.nspid, self.fork)) == self._own]
        return out

    def _own_sandbox(self, procs: list[Proc]) -> str | None:
        """Through batch and MCP, the sandbox that runs the script (sandbox_of), told from the
        warm one beside it by a hold file in its /tmp (the prologue makes the slot, hold()
        renames it); kept once seen, its namespace held open so that its id is not reused. None
        while it cannot be told."""
        if self._own is None:
            holders: dict[str | None, Proc] = {}
            for p in procs:
                if p.inside and p.is_python and _has_hold_file(p.pid):
                    holders.setdefault(sandbox_of(p.pid, sandbox_depth(p.nspid, self.fork)), p)
            holders.pop(None, None)
            if len(holders) != 1:
                return None
            [(own, p)] = holders.items()
            try:
                fd = sandbox_ns_fd(p.pid, sandbox_depth(p.nspid, self.fork))
            except OSError:
                return None
            if f"pid:[{os.fstat(fd).st_ino}]" != own:
                os.close(fd)
                return None
            at_cleanup(lambda: os.close(fd))
            self._own = own
        return self._own

    def inside(self) -> list[Proc]:
        return [p for p in self.procs() if p.inside]

    def python(self) -> Proc:
        """The sandboxed interpreter (the script): the python inside whose parent is init.
        Through batch --fork, the job's: PID 2 of its own namespace, below the zygote's."""
        if self.fork:
            init = self.init()
            jobs = [p for p in self.inside() if p.is_python and p.inner_pid != 1
                    and p.status.get("PPid") == str(init.pid)]
            return jobs[0] if len(jobs) == 1 else init
        init = self.init()
        pys = [p for p in self.inside() if p.is_python]
        top = [p for p in pys if p.status.get("PPid") == str(init.pid)]
        if len(top) != 1:
            raise Verdict(f"cannot identify the sandboxed python: {pys}")
        return top[0]

    def init(self) -> Proc:
        if self.fork:  # PID 1 of the job's namespace: its init, a fork of the zygote's python
            inits = [p for p in self.inside() if p.is_python and p.inner_pid == 1]
            if len(inits) != 1:
                raise Verdict(f"cannot identify the forked job: {self.inside()}")
            return inits[0]
        inside = self.inside()
        depth = min((len(p.nspid) for p in inside), default=0)
        # A nested PID namespace has its own pid 1, one level deeper.
        inits = [p for p in inside if p.inner_pid == 1 and len(p.nspid) == depth]
        if len(inits) != 1:
            raise Verdict(f"cannot identify the sandbox's init: {self.inside()}")
        return inits[0]

    def filters(self):
        """The seccomp programs of the sandboxed python (see seccomp_filters), as a list with
        ``listener_holders``: processes of the run that hold a seccomp notification listener."""
        if self._filters is None:
            self._filters = _Filters(seccomp_filters(self.python().pid))
            for p in self.inside():
                for fd, target in fd_targets(p.pid).items():
                    if "seccomp" in target:
                        self._filters.listener_holders.append(
                            f"pid {p.inner_pid} (host {p.pid}, fd {fd} -> {target})")
        return self._filters

    def leftovers(self, grace: float = 0.0) -> list[int]:
        pidns = self.sampler.pid_namespaces if self.sampler else ()
        userns = self.sampler.user_namespaces if self.sampler else ()
        deadline = time.monotonic() + grace
        while True:
            found = leftovers(self.marker, pidns, userns)
            if not found or time.monotonic() >= deadline:
                return found
            time.sleep(0.05)


class SessionSandbox(Sandbox):
    """A ``pysandbox session`` the test drives cell by cell, for the attacks on sessions
    themselves (SESSION_ONLY). ``ask(code)`` sends one request and returns its result, parsed
    (None if none came in time); the first cell gets the session prologue and PRELUDE (MARKER,
    note(), syscall(), hold(), ...), so later ones can use them. ``finish()`` closes stdin;
    check_behaved then judges the session's conduct: exactly one line per request on its stdout,
    in order, each naming its request (id and cell number), and exit 0.
    """

    def __init__(self, options=(), timeout: str = "5s", **kwargs):
        super().__init__("", options=options, timeout=timeout, via="session", **kwargs)
        self.asked: list = []
        self.results: list[dict | None] = []

    def _send_cell(self) -> None:
        pass  # cells come from ask()

    def ask(self, code: str, id=None, timeout: float | None = None) -> dict | None:
        body = textwrap.dedent(code).strip() + "\n"
        if not self.asked:
            body = self.session_cell() + "\n" + body
        id = id if id is not None else f"{self.marker}-{len(self.asked) + 1}"
        self.asked.append(id)
        want = len(self.asked)
        try:
            self.proc.stdin.write((json.dumps({"id": id, "code": body}) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass
        reader = self._readers[0]
        deadline = time.monotonic() + (timeout if timeout is not None else self.host_timeout)
        with reader.lock:
            while reader.lines < want and reader.is_alive() and time.monotonic() < deadline:
                reader.lock.wait(0.1)
            lines = bytes(reader.data).split(b"\n")
        result = None
        if len(lines) > want - 1 and reader.lines >= want:
            try:
                result = json.loads(lines[want - 1])
            except ValueError:
                result = None
        self.results.append(result if isinstance(result, dict) else None)
        return self.results[-1]

    def supervisor_rss_kib(self) -> int:
        """The session process's resident memory now (the supervisor: outside the sandbox's
        limits). 0 once it is gone."""
        st = status(self.proc.pid)
        return int(st.get("VmRSS", "0 kB").split()[0] or 0)

    def _front_outcome(self, o: Outcome) -> None:
        session_rc = o.rc
        o.front_output = o.stdout + b"\n" + o.stderr
        _check_session_schema(o.stdout)
        reader = self._readers[0]
        problems = o.front_problems
        if reader.total > len(reader.data):
            problems.append(("misbehaved", f"the session wrote {reader.total} bytes on stdout, "
                             f"more than the {self.keep} the test keeps"))
        if reader.lines != len(self.asked):
            problems.append(("escape", f"the session wrote {reader.lines} lines on its stdout "
                             f"for {len(self.asked)} requests: its framing is broken"))
        lines = bytes(reader.data).split(b"\n")
        for i, id in enumerate(self.asked):
            try:
                r = json.loads(lines[i]) if i < len(lines) else None
            except ValueError:
                r = None
            if not isinstance(r, dict):
                problems.append(("misbehaved", f"line {i + 1} is no result: {lines[i][:200]!r}"
                                 if i < len(lines) else f"no result for request {i + 1}"))
                continue
            if r.get("id") != id or r.get("cell") != i + 1:
                problems.append(("escape", f"line {i + 1} is not request {i + 1}'s result: id "
                                 f"{r.get('id')!r}, cell {r.get('cell')!r}"))
        if session_rc != 0:
            problems.append(("misbehaved", f"the session exited {session_rc}"))


def _parse_duration(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)?", text)
    if not m:
        return 5.0
    value = float(m.group(1))
    return value / 1000 if m.group(2) == "ms" else value * 60 if m.group(2) == "m" else value


# --------------------------------------------------------------------------- behaviour


def check_behaved(judge: Judge, sb: Sandbox, allowed=(0,), *, grace: float = 2.0,
                  expect_notes=()) -> Outcome:
    """Finish the run and record misbehaviour: host timeout, pysandbox crash or error, an exit
    code outside ``allowed``, notes the script never reached, processes left behind."""
    o = sb.finish()
    if o.host_timeout:
        judge.misbehaved(f"did not finish within {sb.host_timeout:.0f}s (killed by the test)")
    elif o.rc is None or o.rc < 0:
        judge.misbehaved(f"pysandbox itself died of signal {-(o.rc or 0)}")
    elif o.rc == SANDBOX_ERROR and SANDBOX_ERROR not in allowed:
        tail = o.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        judge.misbehaved(f"pysandbox failed (125): {tail[0][:300]}")
    elif o.rc in (126, 127) and o.rc not in allowed:
        judge.misbehaved(f"interpreter could not run ({o.rc})")
    elif o.rc not in allowed:
        judge.misbehaved(f"exit code {o.rc}, expected one of {sorted(allowed)}")
    for kind, message in o.front_problems:
        (judge.escape if kind == "escape" else judge.misbehaved)(f"{sb.via}: {message}")
    for what in expect_notes:
        if o.note(what) is None:
            judge.misbehaved(f"the script never reported {what!r} (it did not get that far)")
    left = sb.leftovers(grace)
    if left:
        desc = ", ".join(f"{p} {cmdline(p)[:2]}" for p in left[:5])
        kill_pids(left)
        judge.escape(f"{len(left)} process(es) of the run outlived it: {desc}")
    if sb.sampler:
        sb.sampler.release()
    return o


def check_bomb_went_off(judge: Judge, o: Outcome, reached_hold: bool, measured_mib: int,
                        limit_mib: int, refused_call: str | None) -> None:
    """A memory bomb's measurement proves containment only if the bomb went off: the script held
    (or the run was killed, as the memory limit may do), and either it filled at least half the
    limit, or pysandbox reports on stderr that the kernel refused ``refused_call`` (the bomb's
    first step; None: nothing refuses it). Otherwise the small number measured means nothing
    was tested."""
    if not reached_hold and o.rc != signalled(9):
        judge.misbehaved("the script never reached the hold point, and was not killed")
    refused = refused_call is not None and re.search(
        rb"pysandbox: the sandbox policy denied \d+ system calls?: .*\b"
        + re.escape(refused_call.encode()) + rb"\b", o.stderr)
    if reached_hold and measured_mib < limit_mib // 2 and not refused:
        judge.misbehaved(f"only {measured_mib} MiB measured" + (
            f" and no refused {refused_call} reported" if refused_call else "")
            + ": the bomb never went off, nothing was tested")


def check_secrets(judge: Judge, o: Outcome, secrets: dict[str, str]) -> None:
    """Each secret (name -> value) must be absent from everything the run printed."""
    for name, value in secrets.items():
        if value and value.encode() in o.output:
            judge.escape(f"{name} appeared in the script's output")


def check_held_fds(judge: Judge, sb: Sandbox, patterns: dict[str, str]) -> None:
    """No process of the run may hold an fd whose link matches a pattern (name -> regex)."""
    for p in sb.inside():
        for fd, target in fd_targets(p.pid).items():
            for name, rx in patterns.items():
                if re.search(rx, target):
                    judge.escape(f"pid {p.inner_pid} (host {p.pid}) holds {name} fd {fd} -> "
                                 f"{target}")


def check_same_namespaces(judge: Judge, sb: Sandbox) -> None:
    """Every process of the run stays in the namespaces the sandbox made (those of its init)."""
    init = sb.init()
    for p in sb.inside():
        for kind, link in p.ns.items():
            ref = init.ns.get(kind)
            if kind == "pid_for_children":
                ref = init.ns.get("pid")
            if kind == "time_for_children":
                ref = init.ns.get("time")
            if link and ref and link != ref:
                judge.escape(f"pid {p.inner_pid} (host {p.pid}) is in a new {kind} namespace "
                             f"{link} (the sandbox's is {ref})")


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


def syscall_attack(what: str, script: str, *, filter_cases=(), fd_patterns=None,
                   escape_prefixes=(), allowed=(0,), args=(), options=(), at_hold=None,
                   after=None, timeout: str = "5s") -> None:
    """The common shape of a kernel-attack-surface test.

    The script tries the calls (noting each), then ``hold()``s. While it is held the host
    checks: no process of the run holds an fd matching ``fd_patterns``; every process of the
    run is still in the sandbox's namespaces; the seccomp filter denies every case in
    ``filter_cases``; and ``at_hold(judge, sb)`` if given. Afterwards: the run behaved, and any
    noted action starting with one of ``escape_prefixes`` that the script says succeeded is an
    escape (the kernel let the call through); ``after(judge, sb, outcome)`` if given.
    """
    judge = Judge(what)
    with Sandbox(script, args, options=options, timeout=timeout) as sb:
        if sb.wait_ready():
            if fd_patterns:
                check_held_fds(judge, sb, fd_patterns)
            check_same_namespaces(judge, sb)
            if at_hold:
                at_hold(judge, sb)
            if filter_cases:
                check_filter_denies(judge, sb.filters(), filter_cases)
        else:
            judge.misbehaved("the script never reached the hold point")
    o = check_behaved(judge, sb, allowed=allowed, expect_notes=["done"])
    for prefix in escape_prefixes:
        ok = o.succeeded(prefix)
        if ok:
            judge.escape("the kernel let through: " + ", ".join(ok[:6]))
    if after:
        after(judge, sb, o)
    judge.done(o.describe())


def check_result(judge: Judge, o: Outcome) -> dict:
    """The --json result of the run; a run that printed none misbehaved (an empty dict then)."""
    r = o.result()
    if r is None:
        judge.misbehaved(f"no JSON result on stdout ({len(o.stdout)} bytes: "
                         f"{o.stdout[:200]!r})")
        return {}
    return r


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


# --------------------------------------------------------------------------- the proxy

# Prepended (after PRELUDE) to scripts that talk to the --net proxy at 127.0.0.1:3128.
PROXY_CLIENT = r'''
import socket as _socket, threading as _threading, time as _time

def proxy_exchange(raw, tunnel=None, timeout=15.0):
    """Send ``raw`` to the proxy and read its answer until it closes. If a CONNECT is answered
    200, send ``tunnel`` through the tunnel and read on. (status line, body, all bytes read)."""
    data = b""
    s = _socket.create_connection(("127.0.0.1", 3128), timeout=timeout)
    deadline = _time.monotonic() + timeout
    sent = False
    try:
        s.sendall(raw)
        while _time.monotonic() < deadline:
            if tunnel is not None and not sent and b"\r\n\r\n" in data:
                sent = True
                if data.split(b" ", 2)[1:2] == [b"200"]:
                    s.sendall(tunnel)
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(errors="replace"), body, data

def in_parallel(jobs, width=12):
    """Run (label, fn) jobs on ``width`` worker threads; {label: result or 'EXC: ...'}."""
    _threading.stack_size(256 << 10)  # the address-space limit would not fit many 8 MiB stacks
    results = {}
    queue = list(jobs)
    lock = _threading.Lock()
    def worker():
        while True:
            with lock:
                if not queue:
                    return
                label, fn = queue.pop(0)
            try:
                results[label] = fn()
            except Exception as e:
                results[label] = "EXC: %s: %s" % (type(e).__name__, e)
    threads = [_threading.Thread(target=worker) for _ in range(min(width, len(jobs)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results
'''

_RESOLUTION_SCRIPT = r'''
import json
cases = json.loads(ARGS[0])

def one(case):
    label, method, host, port = case
    authority = "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)
    request = ("GET /case-%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
               % (label, authority)).encode()
    if method == "CONNECT":
        raw = ("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (authority, authority)).encode()
        status, body, _ = proxy_exchange(raw, tunnel=request)
    else:
        raw = ("GET http://%s/case-%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
               % (authority, label, authority)).encode()
        status, body, _ = proxy_exchange(raw)
    return json.dumps({"status": status, "body": body[:300].decode(errors="replace")})

results = in_parallel([(c[0], (lambda c=c: one(c))) for c in cases])
for c in cases:
    note(c[0], results[c[0]])
note("done", 0)
'''


def proxy_resolution_attack(what: str, *, interface, listen, denied, allowed_literals=(),
                            routes=(), timeout: str = "40s") -> None:
    """The common shape of an attack on what the proxy lets an allowlisted NAME lead to.

    The test puts ``interface`` (CIDRs) on a fresh host interface, sends ``routes`` to it (into
    nothing), listens on every address of ``listen`` (one port P), and runs pysandbox with --net
    proxy, --json, and a private mount namespace whose /etc/hosts maps a unique name per
    ``denied`` entry ((tag, address)) to its address. Every such NAME:P is in the allowlist, and
    so is every address of ``allowed_literals``, literally. The script asks for each through
    the proxy, by CONNECT (then a GET through the tunnel) and by a plain http:// GET, all at
    once.

    Contained when, for every denied name and both ways, the proxy answered 502 with a body
    that mentions pysandbox, the result's violations has a "network" entry naming it, and no
    listener saw a connection for it (a connection is attributed by the /case-LABEL it asks
    for; one that asks for nothing counts against the attack). The literal addresses are the
    control: each must reach its listener both ways (the operator chose it), or the test proves
    nothing about the path.
    """
    judge = Judge(what)
    host_lock("net")
    host_interface(interface, routes)
    listeners = Listeners(listen)
    port = listeners.port
    token = uuid.uuid4().hex[:8]
    names = {tag: f"{tag}-{token}.pysbt.test" for tag, _ in denied}
    prefix = hosts_file_prefix([(address, names[tag]) for tag, address in denied])
    allow, cases, control = [], [], []
    for tag, _ in denied:
        allow += ["--allow", f"{names[tag]}:{port}"]
        cases += [[f"deny-{tag}-{m.lower()}", m, names[tag], port] for m in ("CONNECT", "GET")]
    for i, address in enumerate(allowed_literals):
        allow += ["--allow", f"[{address}]:{port}" if ":" in address else f"{address}:{port}"]
        labels = [f"literal-{i}-{m.lower()}" for m in ("CONNECT", "GET")]
        cases += [[label, m, address, port] for label, m in zip(labels, ("CONNECT", "GET"))]
        control += labels
    script = PROXY_CLIENT + "\n" + _RESOLUTION_SCRIPT
    sb = Sandbox(script, [json.dumps(cases)], options=allow + ["--json"], timeout=timeout,
                 prefix=prefix)
    o = sb.run()
    check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    r = check_result(judge, o)
    network = [v for v in r.get("violations") or []
               if isinstance(v, dict) and v.get("kind") == "network"]
    for tag, address in denied:
        for m in ("connect", "get"):
            label = f"deny-{tag}-{m}"
            try:
                answer = json.loads(o.note(label) or "null")
            except ValueError:
                answer = None
            if not isinstance(answer, dict):
                judge.misbehaved(f"{label}: no answer noted ({o.note(label)!r})")
                continue
            status_line = answer.get("status", "")
            if status_line.split(" ")[1:2] != ["502"] or "pysandbox" not in answer.get("body", ""):
                judge.escape(f"{names[tag]} ({address}) by {m.upper()}: the proxy answered "
                             f"{status_line!r}, not 502 from pysandbox")
        if not any(names[tag] in str(v.get("what")) for v in network):
            judge.escape(f"no 'network' violation names {names[tag]} ({address})")
    log = listeners.settle()
    seen_control = set()
    for c in log:
        m = re.search(rb"/case-([A-Za-z0-9_.-]+)", c["data"])
        label = m.group(1).decode() if m else None
        if label in control:
            seen_control.add(label)
            continue
        asked = f"for {label}" if label else f"that asked for nothing ({c['data'][:80]!r})"
        judge.escape(f"the listener on {c['local']} got a connection {asked}")
    for label in control:
        if label not in seen_control:
            judge.misbehaved(f"control {label}: a literally allowed address was not reached, so "
                             "the proxy's path to the listeners is broken")
    judge.done(o.describe() + f"\nlisteners on port {port}: "
               + "; ".join(f"{c['local']} {c['data'][:60]!r}" for c in log))
