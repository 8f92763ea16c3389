"""The attack runner (tests/security/*.py): verdicts, judging, and the shapes attacks share.

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
holds for the sandboxed process (read with PTRACE_SECCOMP_GET_FILTER and evaluated by
tests/support/seccomp.py), and what is left in the host's /proc after the run. A --json run must
also print one result valid under the result schema (tests/support/result_schema.py); one that
does not makes the run misbehaved.

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
                and MCP" below); ``kernel``: the one cell of a ``pysandbox kernel`` (see
                "Through a kernel"). An attack that only makes sense for ``run`` says so with a
                module-level ``RUN_ONLY = "why"``; it is then an error (exit 2) through the
                others, and tests/CMakeLists.txt does not register it there. An attack on
                sessions themselves (several cells, SessionSandbox) says ``SESSION_ONLY =
                True``: registered only through a session, an error through the others. An
                attack that needs what a kernel does not have (a pysandbox result: --json;
                --output-dir) says ``NO_KERNEL = "why"``: not registered through the kernel.
                ``gvisor``: the same ``pysandbox run`` with ``--kernel gvisor``: the script runs
                on gVisor's kernel, and no host process runs the interpreter, so the host
                judges what it sees instead (Sandbox.gvisor_problems: only runsc runs below the
                sandbox's init, under pysandbox's filter; Sandbox.gvisor_memory_kib: gVisor's
                memory file), and a seccomp denial, answered by gVisor's filter inside, leaves
                no record for the result. Registered for every attack run through ``run``
                (RUN_ONLY ones too); one that needs what a gVisor run lacks (the proxy,
                Landlock) says ``NO_GVISOR = "why"``.
  PYSANDBOX_WITH_ENV
                ``1``: every run mounts a package environment (tests/support/mounted_env.py),
                through whichever front: ``--with-env`` and ``--cache-dir`` name a copy, in a
                store of the run's own, of a small pure-Python package built once into
                PYSANDBOX_ENV_STORE/shared, and the script's prologue imports that package
                first. After each run the host judges, beside the attack's own verdict: a file
                or directory of the copy that changed (content, mode, owner, times) or appeared
                is an escape; and a run whose script ran but never opened the package through
                the mount (inotify on the copy) misbehaved, so the flag cannot silently do
                nothing. An attack that names an environment itself (--with-env in its
                options) keeps its own, and runs an attack makes without ``Sandbox``
                (env_hostile_package's) are as it makes them. tests/CMakeLists.txt turns it on for every attack's
                ``run`` variants (a SESSION_ONLY attack's session ones): each attack file then
                runs once with an environment mounted, root and nobody, without more tests.
  PYSANDBOX_ENV_STORE
                that store's directory (default: <build>/security-env-store); ctest makes it
                fresh in the build tree for each run of the suite, and removes it after.

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

Through a kernel. The test starts ``pysandbox kernel -f FILE`` with the same options, FILE a
connection file it wrote (jupyter_client's write_connection_file: free ports, a fresh key), and
drives it with Debian's jupyter_client (a BlockingKernelClient on that file, as a kernelspec's
client would): kernel_info until iopub answers, the cell (the same prologue as a session's) as
one execute_request, its iopub messages until idle and its execute_reply, then a
shutdown_request. The Outcome is the cell's: ``rc`` and ``cell`` from the execute_reply's
metadata (``pysandbox``: the sandbox's verdict, status, exit code, state, message), ``stdout``
and ``stderr`` its stream messages (and the message, as for a session). The kernel's conduct is
judged on every run: nothing on its own stdout, busy, one execute_input and idle around the
cell, a reply whose status is the verdict's, exit 0 after the shutdown.

The hostile script gets ``PRELUDE`` prepended. It defines MARKER (argv[1], a unique token the
host uses to find every process of the run), ARGS (argv[2:]), ``syscall(nr, ...)`` (raw x86_64
syscall through ctypes, returning the result or -errno), ``attempt(what, fn, ...)`` and
``note(what, result)`` (one ``NOTE {json}`` line per action, for diagnostics), and
``hold(tag)``: print ``READY <tag>`` and block until the host sends a line (or closes stdin), so
the host can inspect the live sandbox at that point (``hold_quiet(tag)`` does the same for a
--json run, whose output the host sees only at the end: it signals with a file in /tmp).

The helpers themselves are the test support package's (tests/support), re-exported here so an
attack reads ``A.<name>``: the front drivers (support/fronts.py: Sandbox, SessionSandbox,
PRELUDE), the host's /proc (support/procfs.py), seccomp filters (support/seccomp.py), files and
cleanups (support/files.py), and host fixtures (support/host.py): ``host_lock`` (serializes
tests that change host-wide network state), ``host_interface`` (a test interface with
addresses), ``Listeners`` (logging TCP servers), ``hosts_file_prefix`` (pysandbox in a mount
namespace with another /etc/hosts), ``mount_tmpfs`` (a filesystem of known size). This file
keeps what is the runner's: ``main`` and ``Judge`` (the verdict), the checks that judge a run,
and ``syscall_attack`` and ``proxy_resolution_attack``, the shapes several attacks share.
"""

from __future__ import annotations

import json
import os
import re
import sys
import traceback
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the support package
from support import env, files, fronts  # noqa: E402
from support.env import (NOBODY, PYSANDBOX, SANDBOX_UID, TIME_SLACK_SCALE,  # noqa: E402
                         Verdict)
from support.files import (at_cleanup, new_secret, private_dir, remove,  # noqa: E402
                           shared_dir, write_file)
from support.fronts import (FRONTS, PRELUDE, VIA, Outcome, Sandbox,  # noqa: E402
                            SessionSandbox, kernel_only_profile, new_marker,
                            script_file, session_profile)
from support.host import (Listeners, canary, file_state, host_addresses,  # noqa: E402
                          host_interface, host_lock, hosts_file_prefix, in_namespace,
                          landlock_abi, listening_tcp_ports, loopback_up_in, mount_tmpfs,
                          nobody_name, spawn_victim, tree_state, used_bytes,
                          usr_fixture_dir, victim_in_pid_namespace)
from support.procfs import (Proc, all_pids, cmdline, exe, fd_targets,  # noqa: E402
                            kill_pids, mount_table, mountinfo, namespaces, read_bytes,
                            readable_sockets, readlink, socket_families, status)
from support.seccomp import (AUDIT_ARCH_I386, AUDIT_ARCH_X86_64, RET_ALLOW,  # noqa: E402
                             RET_ERRNO, RET_KILL_PROCESS, RET_TRAP, X32_SYSCALL_BIT,
                             action_name, denies, verdict)

# What an attack reads as A.<name> (re-exported from tests/support) and what this file defines.
__all__ = [
    "AUDIT_ARCH_I386", "AUDIT_ARCH_X86_64", "FRONTS", "HOLDING_TIMEOUT", "Judge", "Listeners",
    "NOBODY", "Outcome", "PRELUDE", "PROXY_CLIENT", "PYSANDBOX", "Proc", "RESULT_OPTIONS", "RET_ALLOW", "RET_ERRNO",
    "RET_KILL_PROCESS", "RET_TRAP", "RUN_AS", "SANDBOX_ERROR", "SANDBOX_UID", "Sandbox",
    "SessionSandbox", "TIMEOUT", "TIME_SLACK_SCALE", "VIA", "Verdict", "X32_SYSCALL_BIT",
    "action_name", "all_pids", "at_cleanup", "canary", "check_behaved", "check_bomb_went_off",
    "check_filter_denies", "check_held_fds", "check_result", "check_same_mounts",
    "check_same_namespaces",
    "check_secrets", "check_verdict", "cmdline", "denies", "exe", "fd_targets", "file_state",
    "host_addresses", "host_interface", "host_lock", "hosts_file_prefix", "in_namespace",
    "kernel_only_profile", "kill_pids", "landlock_abi", "listening_tcp_ports", "loopback_up_in",
    "main", "mount_table", "mount_tmpfs", "mountinfo", "namespaces", "new_marker", "new_secret",
    "nobody_name", "private_dir", "proxy_resolution_attack", "read_bytes", "readable_sockets",
    "readlink", "remove", "script_file", "session_profile", "shared_dir", "signalled",
    "socket_families", "spawn_victim", "status", "syscall_attack", "tree_state", "used_bytes",
    "usr_fixture_dir", "verdict", "victim_in_pid_namespace", "write_file",
]

RUN_AS = env.RUN_AS or "root"

# Exit codes (README.md, "Exit codes").
TIMEOUT = 124
SANDBOX_ERROR = 125
# The limit of a run that holds (hold()) while another run starts, runs and ends beside it: that
# takes more than the default 5 s on a loaded machine (seen at a load of 14 on two cores). The
# holding run ends when told to go, so the long limit costs nothing.
HOLDING_TIMEOUT = "30s"


def signalled(sig: int) -> int:
    """The exit code pysandbox reports when the script died of ``sig``."""
    return 128 + int(sig)


# --------------------------------------------------------------------------- verdicts


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
        files.run_cleanups()
        for problem in fronts.schema_problems:
            self.misbehaved(problem)
        fronts.schema_problems.clear()
        for kind, problem in fronts.env_problems:
            (self.escape if kind == "escape" else self.misbehaved)(problem)
        fronts.env_problems.clear()
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
        if VIA not in ("run", "gvisor") and run_only:
            raise Verdict(f"this attack is run-only ({run_only}); it has no {VIA} variant")
        if VIA != "session" and getattr(sys.modules["__main__"], "SESSION_ONLY", False):
            raise Verdict("this attack is on sessions themselves: run it with "
                          "PYSANDBOX_VIA=session")
        no_kernel = getattr(sys.modules["__main__"], "NO_KERNEL", None)
        if VIA == "kernel" and no_kernel:
            raise Verdict(f"this attack has no kernel variant ({no_kernel})")
        no_gvisor = getattr(sys.modules["__main__"], "NO_GVISOR", None)
        if VIA == "gvisor" and no_gvisor:
            raise Verdict(f"this attack has no gvisor variant ({no_gvisor})")
        if missing := env.binary_missing():
            raise Verdict(missing)
        test()
        raise Verdict("the test ended without a verdict (test bug)")
    except Verdict as e:
        files.run_cleanups()
        print(f"ERROR: {e}", flush=True)
        os._exit(2)
    except BaseException:
        files.run_cleanups()
        traceback.print_exc()
        print("ERROR: the test raised (test bug, see the traceback above)", flush=True)
        os._exit(2)


def check_filter_denies(judge: Judge, filters, cases, label: str = "") -> None:
    """``cases``: (description, nr, arch, args). Each must be denied by the filter; two calls
    that must work (read on x86_64, a thread clone) must be allowed, or the evaluation is
    suspect (a test bug, reported as an error)."""
    for sane_nr, sane_args, what in ((0, (0, 0, 0), "read"),
                                     (56, (0x3D0F00,), "clone(CLONE_VM|..|CLONE_THREAD)")):
        if filters and not verdict(filters, sane_nr, AUDIT_ARCH_X86_64, sane_args) == RET_ALLOW:
            raise Verdict(f"the filter evaluation denies {what}: evaluator or test bug")
    if getattr(filters, "gvisor", None) is not None:
        # Through gVisor the script's calls never reach the host kernel: gVisor's sentry
        # answers them, enforcing the profile's allowlist inside, where the host cannot read
        # it. What the host can judge is that only runsc runs there, under pysandbox's filter;
        # the attack's own checks judge what the calls achieved.
        for problem in filters.gvisor:
            judge.escape(problem)
        return
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
                        limit_mib: int, refused_call: str | None,
                        refused_note: str | None = None) -> None:
    """A memory bomb's measurement proves containment only if the bomb went off: the script held
    (or the run was killed, as the memory limit may do), and either it filled at least half the
    limit, or pysandbox reports on stderr that the kernel refused ``refused_call`` (the bomb's
    first step; None: nothing refuses it). Otherwise the small number measured means nothing
    was tested. Through gVisor, whose filter refuses a call with EPERM and no record for
    pysandbox, the refusal is the script's note ``refused_note`` starting with EPERM."""
    if not reached_hold and o.rc != signalled(9):
        judge.misbehaved("the script never reached the hold point, and was not killed")
    refused = refused_call is not None and re.search(
        rb"pysandbox: the sandbox policy denied \d+ system calls?: .*\b"
        + re.escape(refused_call.encode()) + rb"\b", o.stderr)
    if VIA == "gvisor" and refused_call is not None and refused_note is not None:
        refused = str(o.note(refused_note)).startswith("EPERM")
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


def check_same_mounts(judge: Judge, before: list[tuple], after: list[tuple]) -> None:
    """The sandbox's mount table (mount_table of its process) is the same after the attempts as
    before them."""
    if after != before:
        new = [m for m in after if m not in before]
        gone = [m for m in before if m not in after]
        judge.escape(f"the sandbox's mounts changed: new {new[:3]}, gone {gone[:3]}")


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


# --json, the options a run needs for check_verdict: none through a kernel, which prints no
# pysandbox result (its execute_reply carries the verdict).
RESULT_OPTIONS = [] if VIA == "kernel" else ["--json"]


def check_verdict(judge: Judge, o: Outcome) -> dict:
    """How the run ended, in pysandbox's words: its --json result (check_result, the run made
    with RESULT_OPTIONS), or through a kernel the verdict of the execute_reply, which has only
    status, state, exit_code, signal, pysandbox_exit_code, message, violations, warnings,
    truncated and usage (an empty dict, the run misbehaved, when there is none)."""
    if o.via != "kernel":
        return check_result(judge, o)
    if o.cell is None:
        judge.misbehaved("the kernel's execute_reply carried no verdict")
        return {}
    return o.cell


def check_result(judge: Judge, o: Outcome) -> dict:
    """The --json result of the run; a run that printed none misbehaved (an empty dict then)."""
    r = o.result()
    if r is None:
        judge.misbehaved(f"no JSON result on stdout ({len(o.stdout)} bytes: "
                         f"{o.stdout[:200]!r})")
        return {}
    return r


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
    sb = Sandbox(script, [json.dumps(cases)], options=allow + RESULT_OPTIONS, timeout=timeout,
                 prefix=prefix)
    o = sb.run()
    check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    r = check_verdict(judge, o)
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
