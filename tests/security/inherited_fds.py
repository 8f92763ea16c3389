#!/usr/bin/python3
"""Use file descriptors the caller leaked into pysandbox (not close-on-exec).

The caller leaks, at scattered numbers: a read fd on a root-only secret file, an append fd on
a root-only host file, a directory fd of a root-only directory holding a secret, an O_PATH fd
of the host's /, a listening TCP socket (with a client already queued on it), one end of a
connected unix socket pair, the write end of a pipe, and a read end of a pipe holding a secret.
The script probes fds 3..4095 and tries read, write, accept, send, openat, fchdir and
/proc/self/fd re-opens on each. Contained when no secret reaches the output, the host files and
directory are unchanged, the queued connection is still waiting, the host pipe and socket
ends received nothing, and the secret in the pipe is still there.
"""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os, socket, stat
for fd in range(3, 4096):
    if fd in DRIVER_FDS:
        continue  # a session driver's channel, not the caller's (reading it would wait forever)
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    note("fd %d" % fd, "ok: mode %o -> %s" % (st.st_mode, os.readlink("/proc/self/fd/%d" % fd)))
    attempt("read %d" % fd, lambda: os.pread(fd, 4096, 0) if stat.S_ISREG(st.st_mode)
            else os.read(fd, 4096))
    attempt("write %d" % fd, os.write, fd, b"PWNED " + MARKER.encode())
    attempt("reopen %d" % fd, lambda: open("/proc/self/fd/%d" % fd, "rb").read())
    attempt("openat %d" % fd, lambda: open("secret.txt", "rb", opener=lambda p, f: os.open(p, f,
            dir_fd=fd)).read())
    attempt("create at %d" % fd, lambda: os.close(os.open("pwned-" + MARKER, os.O_CREAT |
            os.O_WRONLY, dir_fd=fd)))
    attempt("listdir %d" % fd, os.listdir, fd)
    if stat.S_ISSOCK(st.st_mode):
        s = socket.socket(fileno=os.dup(fd))
        s.settimeout(0.5)
        attempt("accept %d" % fd, lambda: s.accept()[0].sendall(b"PWNED"))
        attempt("send %d" % fd, s.send, b"PWNED")
    if stat.S_ISDIR(st.st_mode) or True:
        cwd = os.getcwd()
        if not isinstance(attempt("fchdir %d" % fd, os.fchdir, fd), Exception):
            attempt("read via fchdir %d" % fd, lambda: open("secret.txt", "rb").read())
            attempt("listdir .. via fchdir %d" % fd, os.listdir, "..")
            os.chdir(cwd)
note("done", 0)
'''


def test():
    judge = A.Judge("file descriptors leaked by the caller")
    private = A.private_dir()
    secret_path, secret = A.canary(private, "secret.txt", mode=0o600)
    append_path = A.write_file(private / "append.txt", "host file\n", mode=0o600)
    dir_secret_path, dir_secret = A.canary(private, "secret2.txt", mode=0o600)
    pipe_secret = A.new_secret()

    fds = {}
    fds["secret file"] = os.open(secret_path, os.O_RDONLY)
    fds["append file"] = os.open(append_path, os.O_WRONLY | os.O_APPEND)
    fds["root-only directory"] = os.open(private, os.O_RDONLY | os.O_DIRECTORY)
    fds["O_PATH /"] = os.open("/", os.O_PATH)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    client = socket.create_connection(listener.getsockname())
    fds["TCP listener"] = listener.fileno()
    host_end, leaked_end = socket.socketpair()
    fds["socketpair end"] = leaked_end.fileno()
    pipe_r, pipe_w = os.pipe()
    fds["pipe write end"] = pipe_w
    spipe_r, spipe_w = os.pipe()
    os.write(spipe_w, pipe_secret.encode())
    fds["pipe with a secret"] = spipe_r

    # Scatter them over odd numbers (above any the test itself uses), inheritable.
    placed = {}
    for number, (name, fd) in zip((17, 42, 99, 255, 300, 511, 700, 1000, 1023), fds.items()):
        os.dup2(fd, number, inheritable=True)
        placed[name] = number
    before = A.tree_state(private)

    sb = A.Sandbox(SCRIPT, pass_fds=tuple(placed.values()))
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    A.check_secrets(judge, o, {"the leaked file's secret": secret,
                               "the leaked directory's secret": dir_secret,
                               "the leaked pipe's secret": pipe_secret})
    if A.tree_state(private) != before:
        judge.escape("the root-only host directory or its files changed")
    listener.setblocking(False)
    try:
        conn, _ = listener.accept()
        conn.close()
    except BlockingIOError:
        judge.escape("the client queued on the leaked listener was accepted by the sandbox")
    client.setblocking(False)
    host_end.setblocking(False)
    for name, sock in (("TCP client", client), ("socketpair host end", host_end)):
        try:
            data = sock.recv(100)
            if data:
                judge.escape(f"the {name} received {data!r}")
        except BlockingIOError:
            pass
    os.set_blocking(pipe_r, False)
    try:
        data = os.read(pipe_r, 100)
        if data:
            judge.escape(f"the host pipe received {data!r}")
    except BlockingIOError:
        pass
    os.set_blocking(spipe_r, False)
    try:
        left = os.read(spipe_r, 100)
    except BlockingIOError:
        left = b""
    if left != pipe_secret.encode():
        judge.escape("the secret in the leaked pipe was consumed")
    fd_notes = [n["what"] for n in o.notes() if n["what"].startswith("fd ")]
    if fd_notes:
        judge.escape("the script holds leaked fds: " + ", ".join(fd_notes))
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
