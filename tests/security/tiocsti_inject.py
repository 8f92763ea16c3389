#!/usr/bin/python3
"""Inject keystrokes into the caller's terminal with TIOCSTI (and TIOCLINUX paste).

pysandbox runs on a real pty whose slave is its controlling terminal and stdin/stdout/stderr,
as at an interactive shell; the test holds the master. The script tries TIOCSTI of a command
line, character by character, on fds 0..1023, on /dev/tty, /dev/console, /dev/pts/*, and on
re-opens of /proc/self/fd/* and /proc/1/fd/*, also with the ioctl request's upper 32 bits set
(the kernel truncates the request to 32 bits, so a filter must compare only the low half), and
TIOCLINUX paste. The payload is the reverse of an argument, so it is never printed by accident.
Through a session (PYSANDBOX_VIA=session) pysandbox is the session's REPL on that terminal, and
the script is typed in there as a cell. Through batch, MCP and a kernel, which have no REPL,
the terminal is pysandbox's controlling terminal and stderr, as for a batch or a server started
at a shell, and its stdin and stdout (a kernel's sockets) carry the job or the messages. Judged from the host: the payload never
shows up on the master (the line discipline echoes injected input) nor in the slave's pending
input, and the seccomp filter denies ioctl(TIOCSTI) and ioctl(TIOCLINUX), with and without upper
bits set in the request.
"""
import fcntl
import os
import select
import sys
import termios
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

TIOCSTI = 0x5412
TIOCLINUX = 0x541C

SCRIPT = r'''
import glob, os
payload = ARGS[0][::-1] + "\n"
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
def inject(fd, label, request=TIOCSTI):
    ok = 0
    for ch in payload.encode():
        c = ctypes.c_char(ch)
        if syscall(16, fd, request, ctypes.byref(c)) == 0:
            ok += 1
    if ok:
        note("TIOCSTI %s" % label, "ok: %d bytes" % ok)
    return ok
fds = {}
for path in ["/dev/tty", "/dev/console", "/dev/ptmx"] + glob.glob("/dev/pts/*") + \
        glob.glob("/proc/self/fd/*") + glob.glob("/proc/1/fd/*"):
    try:
        fds[os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)] = path
    except OSError as e:
        note("open " + path, -e.errno)
for fd in range(0, 1024):
    try:
        os.fstat(fd)
    except OSError:
        continue
    label = "fd %d (%s)" % (fd, fds.get(fd, os.readlink("/proc/self/fd/%d" % fd)))
    r = syscall(16, fd, TIOCSTI, ctypes.byref(ctypes.c_char(b" ")))
    note("TIOCSTI probe " + label, r)
    if r == 0 or r != -25:   # anything but ENOTTY: try the whole payload
        inject(fd, label)
        inject(fd, label + " high bits", 0xFFFFFFFF00000000 | TIOCSTI)
    sel = ctypes.create_string_buffer(b"\x03" + b"\x00" * 10)   # TIOCL_PASTESEL
    note("TIOCLINUX " + label, syscall(16, fd, TIOCLINUX, sel))
note("done", 0)
hold()
'''


def test():
    judge = A.Judge("TIOCSTI/TIOCLINUX injection into the caller's terminal")
    # With dev.tty.legacy_tiocsti = 0 the kernel refuses TIOCSTI to everyone without
    # CAP_SYS_ADMIN; the filter check below keeps the test meaningful there too.
    master, slave = os.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[3] |= termios.ECHO | termios.ICANON
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    seen = bytearray()
    stop = threading.Event()

    def pump():
        while not stop.is_set():
            r, _, _ = select.select([master], [], [], 0.05)
            if r:
                try:
                    seen.extend(os.read(master, 65536))
                except OSError:
                    return
    reader = threading.Thread(target=pump, daemon=True)
    reader.start()

    def controlling_tty():
        os.setsid()
        fcntl.ioctl(2, termios.TIOCSCTTY, 0)

    arg = A.new_secret("echo INJECTED")
    payload = arg[::-1].encode()
    # Batch, MCP and a kernel: the job or the messages on pipes (a kernel's on sockets), the
    # script's output in the result.
    piped = A.VIA in ("batch", "batchfork", "mcp", "kernel")
    sb = A.Sandbox(SCRIPT, [arg], stdin=None if piped else slave,
                   stdout=None if piped else slave, stderr=slave, preexec_fn=controlling_tty,
                   terminal=None if piped else master)
    sb.start()
    if piped:
        ready = sb.wait_ready(timeout=10)
    else:
        deadline = time.monotonic() + 10
        while b"READY end" not in seen and time.monotonic() < deadline and \
                sb.proc.poll() is None:
            time.sleep(0.05)
        ready = b"READY end" in seen
    if ready:
        A.check_filter_denies(judge, sb.filters(), [
            ("ioctl(TIOCSTI)", 16, A.AUDIT_ARCH_X86_64, (0, TIOCSTI)),
            ("ioctl(TIOCSTI | 1<<32)", 16, A.AUDIT_ARCH_X86_64, (0, (1 << 32) | TIOCSTI)),
            ("ioctl(TIOCSTI | 0xffffffff<<32)", 16, A.AUDIT_ARCH_X86_64,
             (0, 0xFFFFFFFF00000000 | TIOCSTI)),
            ("ioctl(TIOCLINUX)", 16, A.AUDIT_ARCH_X86_64, (0, TIOCLINUX))])
        sb.go()
    else:
        judge.misbehaved("the script never reached the hold point")
    o = A.check_behaved(judge, sb, allowed=(0,))
    time.sleep(0.2)
    stop.set()
    reader.join()
    said = bytes(seen) + b"\n" + o.stdout  # on the terminal, or (piped) in the result
    if b"NOTE" in said and b'"done"' not in said:
        judge.misbehaved("the script did not finish its attempts")
    if payload in bytes(seen):
        judge.escape("the injected command line reached the terminal (echoed on the master)")
    os.set_blocking(slave, False)
    pending = b""
    try:
        pending = os.read(slave, 65536)
    except (BlockingIOError, OSError):
        pass
    if payload in pending:
        judge.escape("the injected command line is waiting in the terminal's input queue")
    injected = [l for l in said.decode(errors="replace").splitlines()
                if '"TIOCSTI' in l and '"ok:' in l]
    if injected:
        judge.escape("the kernel accepted TIOCSTI: " + "; ".join(injected[:3]))
    judge.done(said.decode(errors="replace")[-3000:])


if __name__ == "__main__":
    A.main(test)
