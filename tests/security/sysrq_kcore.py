#!/usr/bin/python3
"""Kernel interfaces in /proc: sysrq-trigger, kcore, kallsyms, kmsg, keys, timer_list, and
writes to /proc/sys.

Judged from the host: while the run is held, the sandboxed process's mount table shows every
sensitive /proc file that this kernel has masked (something mounted over it) and /proc/sys
read-only; the host's kernel symbol addresses and kcore header (both read by the host as root)
never appear in the output; the host's sysctls the script tried to change are unchanged; and
no sysrq message reached the host's kernel log. The only sysrq command sent is 'h' (help),
which is harmless even if it got through.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SENSITIVE = ["/proc/kcore", "/proc/kallsyms", "/proc/keys", "/proc/timer_list",
             "/proc/sched_debug", "/proc/sysrq-trigger", "/proc/kmsg"]
SYSCTLS = {"/proc/sys/kernel/core_pattern": "core-pwned", "/proc/sys/vm/overcommit_memory": "1",
           "/proc/sys/kernel/sysrq": "1", "/proc/sys/fs/pipe-max-size": "4096"}

SCRIPT = r'''
import os
attempt("sysrq h", lambda: open("/proc/sysrq-trigger", "w").write("h"))
for path in ("/proc/kcore", "/proc/kallsyms", "/proc/keys", "/proc/timer_list",
             "/proc/sched_debug", "/proc/modules", "/proc/iomem", "/proc/vmallocinfo"):
    def read(path=path):
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        data = os.read(fd, 1 << 20)
        os.close(fd)
        return data
    r = attempt("read " + path, read)
    if isinstance(r, bytes):
        print("DATA", path, r.hex() if path == "/proc/kcore" else r[:200000], flush=True)
attempt("read /proc/kmsg",
        lambda: os.read(os.open("/proc/kmsg", os.O_RDONLY | os.O_NONBLOCK), 4096))
for path, value in [a.split("=", 1) for a in ARGS]:
    attempt("write " + path, lambda: open(path, "w").write(value))
note("done", 0)
hold()
'''


def read_host(path: str, n: int = 1 << 20) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def test():
    judge = A.Judge("/proc/sysrq-trigger, kcore, kallsyms, kmsg, /proc/sys writes")
    secrets = {}
    for line in read_host("/proc/kallsyms").decode(errors="replace").splitlines()[:50000]:
        parts = line.split()
        if len(parts) >= 3 and parts[2] in ("_text", "_stext", "commit_creds", "init_task",
                                            "prepare_kernel_cred") and int(parts[0], 16):
            secrets[f"kallsyms address of {parts[2]}"] = line.strip()
    kcore = read_host("/proc/kcore", 4096)
    if len(kcore) > 200:
        secrets["kcore program headers"] = kcore[64:160].hex()
    sysctl_before = {p: read_host(p) for p in SYSCTLS}
    kmsg = None
    try:
        kmsg = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        os.lseek(kmsg, 0, os.SEEK_END)
    except OSError:
        kmsg = None

    with A.Sandbox(SCRIPT, [f"{p}={v}" for p, v in SYSCTLS.items()]) as sb:
        if sb.wait_ready():
            if A.VIA == "gvisor":
                # The script's /proc is gVisor's own; the sandbox's, unmasked (src/plan/
                # gvisor.hpp), is only runsc's: what the host checks is that only runsc runs
                # there. The secrets and the host's sysctls are judged below as for every via.
                for problem in sb.gvisor_problems():
                    judge.escape(problem)
            else:
                table = A.mount_table(sb.python().pid)
                points = {row[1]: row for row in table}
                for path in SENSITIVE:
                    if os.path.exists(path) and path not in points:
                        judge.escape(f"{path} exists on this kernel but is not masked in the "
                                     "sandbox")
                sys_row = points.get("/proc/sys")
                if sys_row is None or "ro" not in sys_row[2].split(","):
                    judge.escape(f"/proc/sys is not mounted read-only in the sandbox: {sys_row}")
        else:
            judge.misbehaved("the script never reached the hold point")
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    A.check_secrets(judge, o, secrets)
    for path, value in sysctl_before.items():
        now = read_host(path)
        if now != value:
            judge.escape(f"host {path} changed: {value!r} -> {now!r}")
            try:
                with open(path, "wb") as f:
                    f.write(value)
            except OSError:
                pass
    if kmsg is not None:
        new = b""
        while True:
            try:
                new += os.read(kmsg, 8192)
            except (BlockingIOError, OSError):
                break
        if b"sysrq" in new.lower():
            judge.escape("a sysrq message reached the host's kernel log")
    ok = o.succeeded("sysrq") + o.succeeded("write ")
    if ok:
        judge.escape("the script reports success for: " + ", ".join(ok))
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
