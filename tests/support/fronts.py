"""One hostile script through every front, watched from the host.

A ``Sandbox`` runs a script (PRELUDE prepended) through ``pysandbox run``, or as the one cell of
a ``pysandbox session``, the one job of a ``pysandbox batch`` (cloned, or forked by a zygote:
``batchfork``), the one run_python call to a ``pysandbox mcp`` server or the one cell of a
``pysandbox kernel`` (driven by Debian's jupyter_client), or through ``pysandbox run --kernel
gvisor`` (``gvisor``: a run on gVisor's kernel), as PYSANDBOX_VIA (or ``via``) says;
tests/security/attack.py describes the protocol. The host sees the run's
processes while it lasts (Sampler, Sandbox.procs), lets the script's hold() points go on, and
collects an ``Outcome``: for a front other than run, the result object's, with the front's own
framing judged. ``SessionSandbox`` drives a session cell by cell.

Every --json result and session line is checked against the result schema; what breaks it is
collected in ``schema_problems`` for the runner's verdict. With PYSANDBOX_WITH_ENV=1 every run
mounts a package environment of its own (support/mounted_env.py), and what the run did to it, or
that it was not mounted, is collected in ``env_problems``.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import threading
import time
from pathlib import Path

from support import files, mounted_env, result_schema
from support.env import AS_NOBODY, NOBODY, PYSANDBOX, RUN_AS, Verdict, parse_duration
from support.files import at_cleanup, shared_dir, write_file
from support.procfs import (Proc, all_pids, cmdline, fd_targets, kill_pids, marker_pids,
                            proportional_kib, readlink, run_processes, sandbox_depth, sandbox_ns_fd, sandbox_of,
                            settle, status)
from support.running import clip_output
from support.seccomp import Filters, seccomp_filters

VIA = os.environ.get("PYSANDBOX_VIA", "run") or "run"
FRONTS = ("run", "session", "batch", "mcp", "batchfork", "kernel", "gvisor")
MCP_PROTOCOL = "2025-06-18"

# Every --json result of the test's runs that does not match the result schema (see
# Sandbox.finish): each one makes the run misbehaved, whatever else the test judged.
schema_problems: list[str] = []

# With PYSANDBOX_WITH_ENV=1, what each run did to the environment it mounted, or that it was not
# mounted (mounted_env.Mount.problems): (kind, message), kind "escape" or "misbehaved".
env_problems: list[tuple[str, str]] = []


def new_marker() -> str:
    """A unique token for one run; also a valid module name (a session's preload carries it)."""
    return files.new_marker("pysandbox_attack_")


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


def script_file(body: str, name: str = "attack.py", directory: Path | None = None,
                probe: bool = mounted_env.WITH_ENV) -> Path:
    """PRELUDE + the dedented ``body`` in a fresh directory that uid 65534 can read (with
    ``probe``, PYSANDBOX_WITH_ENV=1, the import of the mounted environment's package between
    them)."""
    directory = directory or shared_dir()
    probe_import = mounted_env.IMPORT_PROBE if probe else ""
    return write_file(directory / name,
                      PRELUDE + probe_import + "\n" + textwrap.dedent(body).lstrip())


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
        return result_schema.stream(r, "stdout")

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
            return clip_output(b, 3000, "\n[...]\n")
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
    sandbox at a time (sandbox_of), the largest of them; the namespaces are all of them.

    ``proportional``: a process's resident memory is its proportional share (Pss: a page shared
    with N processes counts 1/N in each) instead of VmRSS. A sandbox's init that the front forked
    without exec still maps the front's heap, copy-on-write: VmRSS counts those pages whole in
    both, as if the run had allocated them; summed over the sandbox's processes, Pss counts each
    page the run's processes share among themselves once, and the front's only in part. Reading it
    walks the process's page tables (smaps_rollup): only for tests that judge memory."""

    def __init__(self, marker: str, interval: float = 0.02, by_sandbox: bool = False,
                 fork: bool = False, proportional: bool = False):
        super().__init__(daemon=True)
        self.marker = marker
        self.by_sandbox = by_sandbox
        self.fork = fork
        self.proportional = proportional
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
            count[2] += (proportional_kib(pid) if self.proportional else
                         int(st.get("VmRSS", "0 kB").split()[0] or 0))
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


# Options of `run` that a session, batch and MCP do not have: an attack that needs one is
# RUN_ONLY.
_RUN_ONLY_OPTIONS = ("--workdir", "-c", "-")

# What a kernel does not have: no pysandbox result (its cell's outcome is Jupyter messages), no
# --output-dir. An attack that needs one declares NO_KERNEL.
_NO_KERNEL_OPTIONS = ("--json", "--output-dir")

# How long the kernel client waits for iopub to show a kernel_info request's status before it
# asks again: a SUB socket gets nothing published before its subscription reached the kernel.
_KERNEL_NUDGE = 0.2

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
        schema_problems.append(f"a line of the {via} breaks the schema: "
                                + str(e).replace("\n", " "))


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
                 terminal: int | None = None, via: str | None = None,
                 proportional: bool = False):
        self.marker = marker or new_marker()
        # PYSANDBOX_WITH_ENV=1: this run's own copy of the probe environment, mounted by every
        # front alike (--with-env, --cache-dir), unless the attack mounts one of its own.
        own_env = any(str(o).split("=", 1)[0] == "--with-env" for o in options)
        self.env_mount = mounted_env.Mount(self.marker) \
            if mounted_env.WITH_ENV and not own_env else None
        self.script = script if script is not None else \
            script_file(body or "", probe=self.env_mount is not None)
        self.args = [str(a) for a in args]
        self.binary = binary or PYSANDBOX
        seconds = parse_duration(timeout) if timeout else 5.0
        self.host_timeout = host_timeout if host_timeout is not None else seconds + 5.0
        nobody = RUN_AS == "nobody" if as_nobody is None else as_nobody
        self.via = via or VIA
        # batch --fork is batch to everything here but its command line and the prologue.
        self.fork = self.via == "batchfork"
        if self.fork:
            self.via = "batch"
        # gvisor is run to everything here but its command line: `run --kernel gvisor`, the
        # script served by gVisor's kernel (src/plan/gvisor.hpp).
        self.gvisor = self.via == "gvisor"
        if self.gvisor:
            self.via = "run"
        self.terminal = terminal
        self.json = False
        self.inputs: list[str] = []
        chosen, rest = _split_profile(options)
        if self.env_mount:
            rest = rest + self.env_mount.options()
        if self.via == "kernel":
            for o in rest:
                if o in _NO_KERNEL_OPTIONS or o.split("=", 1)[0] in _NO_KERNEL_OPTIONS:
                    raise Verdict(f"a kernel has no {o.split('=', 1)[0]}: declare the attack "
                                  "NO_KERNEL")
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
            if self.via == "kernel":
                self.connection_file = self._connection_file(nobody)
            command = {"session": ["session", "-p", str(profile), *rest, *limit],
                       "kernel": ["kernel", "-f", str(getattr(self, "connection_file", "")),
                                  "-p", str(profile), *rest, *limit],
                       "batch": ["batch", "-j", "1", *(["--fork"] if self.fork else []),
                                 "-p", str(profile), *rest, *limit, "-"],
                       "mcp": ["mcp", "-p", str(profile), *rest, *limit]}[self.via]
        else:
            profile = ["-p", chosen] if chosen else ["-p", str(kernel_only_profile())]
            if self.gvisor:
                profile += ["--kernel", "gvisor"]
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
                               fork=self.fork, proportional=proportional) \
            if sample else None
        self.start_time = 0.0
        self._filters = None
        self._readers: list[_Reader] = []
        self._stdin_lock = threading.Lock()
        self._releaser: threading.Thread | None = None
        self._sent = threading.Event()  # MCP: the call is written (stdin may close after it)
        self._own: str | None = None  # batch, MCP: the script's sandbox (sandbox_of), once seen
        # kernel: what its client saw of the cell (_kernel_client), and when.
        self._kernel: dict = {"reply": None, "iopub": [], "problems": []}
        self._client: threading.Thread | None = None
        self._replied = threading.Event()

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
        if self.via == "kernel":
            self._client = threading.Thread(target=self._kernel_client, args=(code,),
                                            daemon=True)
            self._client.start()
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

    def _connection_file(self, nobody: bool) -> Path:
        """A kernel's connection file (ports free now, a fresh key), in a directory of the
        kernel's user alone: the key signs every message."""
        import uuid
        from jupyter_client.connect import write_connection_file
        directory = shared_dir(mode=0o700, owner=NOBODY if nobody else None)
        path, _ = write_connection_file(str(directory / "kernel.json"), ip="127.0.0.1",
                                        key=uuid.uuid4().hex.encode())
        if nobody:
            os.chown(path, NOBODY, NOBODY)
        return Path(path)

    def _kernel_client(self, code: str) -> None:
        """A Jupyter client's side of one cell, through jupyter_client's BlockingKernelClient on
        the connection file (the kernel process is the test's, as a kernelspec would start it):
        kernel_info until iopub shows its status (what was published before the subscription
        reached the kernel is lost), the execute_request, its iopub messages until the kernel
        is idle again and its execute_reply, then a shutdown_request on control."""
        from jupyter_client.blocking.client import BlockingKernelClient
        seen = self._kernel
        deadline = self.start_time + self.host_timeout
        kc = BlockingKernelClient(connection_file=str(self.connection_file))
        kc.load_connection_file()
        kc.start_channels(stdin=False, hb=False)

        def wait(get, wanted, patience: float | None = None) -> dict | None:
            """The next message from ``get`` that ``wanted`` accepts; None once the kernel is
            gone, the run's time is up or ``patience`` seconds went by."""
            import queue
            until = deadline if patience is None else min(deadline,
                                                          time.monotonic() + patience)
            while True:
                try:
                    msg = get(timeout=max(0.0, min(until - time.monotonic(), 0.5)))
                except queue.Empty:
                    if self.proc.poll() is not None or time.monotonic() >= until:
                        return None
                    continue
                if wanted(msg):
                    return msg

        def parent_in(ids):
            return lambda msg: msg.get("parent_header", {}).get("msg_id") in ids

        try:
            asked = {kc.kernel_info()}
            if wait(kc.get_shell_msg, parent_in(asked)) is None:
                seen["problems"].append(("misbehaved", "no kernel_info_reply"))
                return
            while wait(kc.get_iopub_msg, parent_in(asked), _KERNEL_NUDGE) is None:
                if self.proc.poll() is not None or time.monotonic() >= deadline:
                    seen["problems"].append(("misbehaved", "iopub showed no kernel_info"))
                    return
                asked.add(kc.kernel_info())
            msg_id = kc.execute(code, allow_stdin=False)

            def collect(msg) -> bool:
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    return False
                seen["iopub"].append(msg)
                return msg["msg_type"] == "status" and \
                    msg["content"].get("execution_state") == "idle"
            if wait(kc.get_iopub_msg, collect) is None:
                seen["problems"].append(("misbehaved", "the kernel never went idle after the "
                                         "execute_request"))
            seen["reply"] = wait(kc.get_shell_msg, parent_in({msg_id}))
            self._replied.set()
            if seen["reply"] is not None:
                done = {kc.shutdown()}
                if wait(kc.get_control_msg, parent_in(done)) is None:
                    seen["problems"].append(("misbehaved", "no shutdown_reply"))
        finally:
            self._replied.set()
            for channel in (kc.shell_channel, kc.iopub_channel, kc.control_channel):
                channel.stop()

    def _kernel_outcome(self, o: Outcome) -> None:
        """The cell's outcome as the kernel's client saw it: ``rc`` and ``cell`` from the
        execute_reply's metadata (the sandbox's verdict, which a cell cannot forge as it can
        ename and evalue), ``stdout`` and ``stderr`` the stream messages' (and pysandbox's
        message, as for a session). The kernel's conduct judged: nothing on its own stdout,
        one reply, of the status the verdict says, busy and idle around the cell, exit 0 after
        the shutdown_request."""
        if self._client is not None:
            self._client.join(timeout=5)
        front_rc = o.rc
        raw_out, raw_err = o.stdout, o.stderr
        seen = self._kernel
        reply = seen["reply"]
        messages = seen["iopub"] + ([reply] if reply is not None else [])
        o.front_output = raw_out + b"\n" + raw_err + b"\n" + "\n".join(
            json.dumps([m.get("content"), m.get("metadata")], default=str, ensure_ascii=False)
            for m in messages).encode("utf-8", "surrogatepass")
        problems = o.front_problems
        problems.extend(seen["problems"])
        if raw_out.strip():
            problems.append(("escape", f"the kernel wrote {len(raw_out)} bytes on its own stdout, "
                             f"outside the protocol: {raw_out[:200]!r}"))
        if reply is None:
            if front_rc == 0:
                problems.append(("misbehaved", "the kernel ended (exit 0) without an "
                                 "execute_reply"))
            return  # the kernel failed or died: its exit code stands, as for run
        verdict = reply.get("metadata", {}).get("pysandbox")
        if not isinstance(verdict, dict):
            problems.append(("misbehaved", "the execute_reply's metadata has no pysandbox "
                             f"verdict: {str(reply.get('metadata'))[:300]}"))
            return
        o.cell = verdict
        if front_rc != 0:
            problems.append(("misbehaved", f"the kernel exited {front_rc} after the "
                             "shutdown_request"))
        code = verdict.get("pysandbox_exit_code")
        if not isinstance(code, int) or isinstance(code, bool):
            problems.append(("misbehaved", f"the verdict's pysandbox_exit_code is {code!r}"))
        else:
            o.rc = code
        content = reply.get("content", {})
        if (content.get("status") == "ok") != (verdict.get("status") == "ok") or \
                content.get("execution_count") != 1:
            problems.append(("misbehaved", f"the execute_reply (status {content.get('status')!r}, "
                             f"count {content.get('execution_count')!r}) is not the cell's "
                             f"(status {verdict.get('status')!r}, the first)"))
        states = [m["content"].get("execution_state") for m in seen["iopub"]
                  if m["msg_type"] == "status"]
        if states != ["busy", "idle"] or \
                [m["msg_type"] for m in seen["iopub"]].count("execute_input") != 1:
            problems.append(("misbehaved", "the cell's iopub messages are not one execute_input "
                             f"between busy and idle: {[m['msg_type'] for m in seen['iopub']]}"))

        def stream(name: str) -> bytes:
            return "".join(str(m["content"].get("text", "")) for m in seen["iopub"]
                           if m["msg_type"] == "stream" and m["content"].get("name") == name
                           ).encode("utf-8", "surrogatepass")
        message = verdict.get("message")
        said = f"pysandbox: {message}\n".encode() if isinstance(message, str) and message else b""
        o.stdout = stream("stdout")
        o.stderr = stream("stderr") + said + raw_err

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
        if self.via == "kernel":
            return self._replied.is_set()
        return (self.via != "run" and self.terminal is None and bool(self._readers)
                and self._readers[0].lines >= (2 if self.via == "mcp" else 1))

    def _held(self, tag: str) -> bool:
        for p in self.inside():
            # Through gVisor the sandbox's /tmp, bound into the container, is init's.
            if (p.is_python or self.gvisor) and os.path.lexists(f"/proc/{p.pid}/root/tmp/.hold-{tag}"):
                return True
        return False

    def _release_holds(self) -> None:
        """Remove every /tmp/.hold-TAG of the run: hold() returns."""
        for p in self.inside():
            if not p.is_python and not self.gvisor:
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
        if self.via == "kernel":
            self._kernel_outcome(o)
            return
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
        o.stdout = line if self.json else result_schema.stream(r, "stdout")
        o.stderr = result_schema.stream(r, "stderr") + said + raw_err

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
        if not isinstance(r, dict) and isinstance(result, dict) and \
                result.get("isError") is True and front_rc not in (0, None):
            return None  # a server that cannot run code says why to the call, then exits non-zero
        if not isinstance(r, dict):
            problems.append(("misbehaved", "the call was answered without a result object: "
                             f"{str(answer)[:300]}"))
            return None
        try:
            result_schema.validate(r)
        except result_schema.SchemaError as e:
            schema_problems.append("the call's structuredContent breaks the schema: "
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
        binaries = {os.path.realpath(self.binary)}
        if self.via == "kernel":  # `pysandbox kernel` execs the kernel program, in libexec
            binaries.add(os.path.realpath(Path(self.binary).parent.parent / "libexec"
                                          / "pysandbox-kernel"))
        for p in self.procs():
            if not p.inside and os.path.realpath(p.exe) in binaries:
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
                schema_problems.append("the --json result breaks the schema: "
                                        + problem.replace("\n", " "))
        if self.via != "run" and self.terminal is None and self._readers and \
                self.outcome.rc is not None and self.outcome.rc >= 0 and not host_timeout:
            self._front_outcome(self.outcome)
        if self.env_mount:
            # The script ran unless pysandbox could not set the sandbox up (125) or start the
            # interpreter (126, 127): then nothing had to open the environment.
            ran = self.outcome.rc is None or self.outcome.rc not in (125, 126, 127)
            env_problems.extend(self.env_mount.problems(ran))
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
        if self.gvisor:
            # No host process runs the interpreter: gVisor's sentry serves the script from
            # runsc's processes (gvisor_problems). init is the host process with the sandbox's
            # root, /tmp, ids and namespaces, which is what the host looks at through it.
            return init
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

    def descendants(self, pid: int) -> list[Proc]:
        """The host processes below ``pid`` (by PPid), whatever namespaces they are in."""
        children: dict[int, list[int]] = {}
        for other in all_pids():
            parent = status(other).get("PPid", "")
            if parent.isdigit():
                children.setdefault(int(parent), []).append(other)
        out, todo = [], list(children.get(pid, []))
        while todo:
            child = todo.pop()
            out.append(Proc(child))
            todo += children.get(child, [])
        return [p for p in out if p.status]

    def gvisor_problems(self) -> list[str]:
        """Through gVisor: what the host sees that says the script's calls are not all served
        by gVisor. Every host process below the sandbox's init must execute runsc (none runs
        the interpreter, which only gVisor's kernel sees) under pysandbox's filter around runsc
        (Seccomp 2, at least one filter: runsc stacks its own on it)."""
        init = self.init()
        below = self.descendants(init.pid)
        if not below:
            return ["no process runs below the sandbox's init: runsc is not there"]
        problems = []
        for p in below:
            if os.path.basename(p.exe.removesuffix(" (deleted)")) != "runsc":
                problems.append(f"pid {p.pid} below init executes {p.exe!r}, not runsc: the "
                                "host kernel serves it")
            if p.status.get("Seccomp") != "2" or int(p.status.get("Seccomp_filters", "0")) < 1:
                problems.append(f"runsc pid {p.pid} has no seccomp filter (Seccomp "
                                f"{p.status.get('Seccomp')}, "
                                f"{p.status.get('Seccomp_filters')} filters)")
        return problems

    def gvisor_memory_kib(self) -> int:
        """Through gVisor: the memory of the script's kernel, the pages of gVisor's memory file
        (a memfd of runsc's, "runsc-memory", shared by its sentry and stubs) that the host
        holds for it: everything the script's processes map, its files in gVisor's own tmpfs
        and its memfds and shared memory included. Counted once per file."""
        seen: set[tuple[int, int]] = set()
        kib = 0
        for p in self.descendants(self.init().pid):
            for fd, target in fd_targets(p.pid).items():
                if not target.startswith("/memfd:runsc-memory"):
                    continue
                try:
                    st = os.stat(f"/proc/{p.pid}/fd/{fd}")
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    kib += st.st_blocks // 2
        return kib

    def filters(self):
        """The seccomp programs of the sandboxed python (see seccomp_filters), as a list with
        ``listener_holders``: processes of the run that hold a seccomp notification listener.
        Through gVisor there is no host process of the script's to read them from: an empty
        list whose ``gvisor`` is what gvisor_problems found (check_filter_denies)."""
        if self._filters is None and self.gvisor:
            self._filters = Filters([])
            self._filters.gvisor = self.gvisor_problems()
        if self._filters is None:
            self._filters = Filters(seccomp_filters(self.python().pid))
            for p in self.inside():
                for fd, target in fd_targets(p.pid).items():
                    if "seccomp" in target:
                        self._filters.listener_holders.append(
                            f"pid {p.inner_pid} (host {p.pid}, fd {fd} -> {target})")
        return self._filters

    def leftovers(self, grace: float = 0.0) -> list[int]:
        pidns = self.sampler.pid_namespaces if self.sampler else ()
        userns = self.sampler.user_namespaces if self.sampler else ()
        return settle(lambda: run_processes(self.marker, pidns, userns), grace, interval=0.05)


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
