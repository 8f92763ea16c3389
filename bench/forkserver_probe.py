#!/usr/bin/env python3
"""Feasibility probe: a fork server (warm "zygote" interpreter) that forks one fresh, fully
isolated sandbox per job, measured against a fresh interpreter per job.

Run as a user who may create user namespaces, with bubblewrap installed (Debian 12: root works):

    python3 bench/forkserver_probe.py all              # checks, step costs, fork vs RSS, throughput
    python3 bench/forkserver_probe.py checks           # containment checks only (about 15 s)
    python3 bench/forkserver_probe.py steps            # per-step cost, fork cost against zygote RSS
    python3 bench/forkserver_probe.py bench [--jobs 1000] [--cold-pandas-jobs 100] [--rounds 3]

`all` writes every number and check as JSON to --out (default: forkserver-probe.json in the
current directory) and prints a summary. Standard library and ctypes only; x86_64 only (the
seccomp program below is built for AUDIT_ARCH_X86_64).

Layout (docs/forkserver-probe.md explains why):

  host driver (this file, `bench` etc.)            stands in for the C++ supervisor
   └ bwrap --unshare-all ... python3 THIS zygote    the outer sandbox of the warm interpreter
      └ zygote prelude: unmount bwrap's read-only covers of /proc/irq and /proc/bus (they make the
        outer proc "not fully visible", so a nested proc mount fails with EPERM), move into a
        second user namespace as uid 65534, drop every capability; then import the preload
      └ per job, C1 = fork(): unshare(USER|NS|PID|IPC|NET|UTS), setgroups/uid_map/gid_map,
         └ C2 = fork() = PID 1 of the job's PID namespace: private /, tmpfs /tmp and /dev/shm,
           fresh /proc + masks, lo up, hostname, rlimits, fds, Landlock, no_new_privs, caps,
           seccomp (+ listener), sends pidfd_open(getpid()) and the listener to the host over the
           job's socket, reads the job's code from it, then runs it (mode pid1) or forks
           C3 to run it and reaps (mode init).

`bench` and `steps` measure four variants: `fork` (the zygote forks C1, which unshares and forks
C2) or `clone` (the zygote clones C2 straight into the namespaces and writes its id maps itself),
each with the job run by C2 as PID 1 (`pid1`) or by a C3 that C2 forks and reaps (`init`); and, for
reference, `cold-bwrap` (bwrap + python3 -c per job) and `pysandbox-run` (xargs -P 2 pysandbox
run), both through xargs. Results: docs/forkserver-probe.md.

The host hands each job three fds over the zygote's control socket (SCM_RIGHTS): the job's
stdout and stderr pipes and one end of a per-job SEQPACKET socketpair. The zygote never reads
the job socket, so it never holds a job's code or data.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import fcntl
import json
import os
import resource
import selectors
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SELF_IN_SANDBOX = "/probe/" + os.path.basename(__file__)
PYSANDBOX = os.environ.get("PYSANDBOX",
                           os.path.join(os.path.dirname(HERE), "build/bin/pysandbox"))
if not os.path.exists(PYSANDBOX):
    PYSANDBOX = "/work/main/build/bin/pysandbox"

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                       ctypes.c_char_p]

# x86_64 syscall numbers
NR = dict(clone=56, fork=57, vfork=58, ptrace=101, pivot_root=155, acct=163, mount=165,
          umount2=166, add_key=248, request_key=249, keyctl=250, unshare=272,
          perf_event_open=298, setns=308, process_vm_readv=310, process_vm_writev=311,
          seccomp=317, bpf=321, userfaultfd=323, io_uring_setup=425, open_tree=428,
          move_mount=429, fsopen=430, fsconfig=431, fsmount=432, fspick=433, pidfd_open=434,
          clone3=435, mount_setattr=442, landlock_create_ruleset=444, landlock_add_rule=445,
          landlock_restrict_self=446, kexec_load=246, init_module=175, finit_module=313,
          open_by_handle_at=304, name_to_handle_at=303, pidfd_getfd=438)

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x20000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
CLONE_NS_FLAGS = (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER
                  | CLONE_NEWPID | CLONE_NEWNET)
JOB_UNSHARE = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NAME = 1, 4, 15
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4

# pysandbox's lists (src/plan.cpp: proc_masked, proc_readonly)
PROC_MASKED = ["/proc/kcore", "/proc/kallsyms", "/proc/keys", "/proc/timer_list",
               "/proc/sched_debug", "/proc/latency_stats", "/proc/sysrq-trigger", "/proc/kmsg",
               "/proc/acpi", "/proc/scsi", "/proc/firmware", "/proc/interrupts"]
PROC_READONLY = ["/proc/sys", "/proc/bus", "/proc/fs", "/proc/irq"]

CASES = {
    "sum": {"preload": "", "code": "print(sum(range(1000)))", "expect": "499500"},
    "pandas": {"preload": "pandas", "code": "import pandas; print(pandas.__version__)",
               "expect": None},
}

BWRAP_BASE = ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
              "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
              "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev",
              "--tmpfs", "/tmp", "--ro-bind", "/etc/alternatives", "/etc/alternatives",
              "--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache", "--clearenv", "--setenv", "PATH", "/usr/bin",
              "--setenv", "HOME", "/tmp", "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
              "--setenv", "OPENBLAS_NUM_THREADS", "1", "--setenv", "MPLBACKEND", "Agg",
              "--chdir", "/tmp"]
PYTHON = "/usr/bin/python3"


def now() -> int:
    return time.perf_counter_ns()


class StepError(Exception):
    def __init__(self, step: str, err: int, call: str = ""):
        super().__init__(step)
        self.step, self.err, self.call = step, err, call


def check(rc: int, step: str, call: str) -> int:
    if rc < 0:
        raise StepError(step, ctypes.get_errno(), call)
    return rc


def sys_call(nr: str, *args) -> int:
    return libc.syscall(ctypes.c_long(NR[nr]), *args)


def mount(src, target, fstype, flags, data, step):
    b = lambda s: None if s is None else s.encode()
    check(libc.mount(b(src), b(target), b(fstype), flags, b(data)), step,
          f"mount({src}, {target}, {fstype}, {flags:#x}, {data})")


def prctl(option, arg2=0, step="prctl"):
    return check(libc.prctl(option, ctypes.c_ulong(arg2), 0, 0, 0), step, f"prctl({option})")


def close_except(keep):
    last = 3
    for fd in sorted(k for k in keep if k >= 3):
        if fd > last:
            os.closerange(last, fd)
        last = fd + 1
    os.closerange(last, 1 << 20)


# ---------------------------------------------------------------- capabilities

class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


def drop_all_caps(cap_last: int, step="caps"):
    for cap in range(cap_last + 1):
        prctl(PR_CAPBSET_DROP, cap, step)
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, step)
    data = (ctypes.c_uint32 * 6)()
    check(libc.capset(ctypes.byref(CapHeader(0x20080522, 0)), data), step, "capset(0)")


# ---------------------------------------------------------------- seccomp

AUDIT_ARCH_X86_64 = 0xC000003E
RET_KILL_PROCESS, RET_ALLOW, RET_USER_NOTIF = 0x80000000, 0x7FFF0000, 0x7FC00000


def RET_ERRNO(e):
    return 0x00050000 | e


def _ins(code, k, jt=0, jf=0):
    return struct.pack("HBBI", code, jt, jf, k)


LD_ABS_W, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
JOB_DENY = ["unshare", "mount", "umount2", "pivot_root", "setns", "ptrace", "process_vm_readv",
            "process_vm_writev", "keyctl", "add_key", "request_key", "bpf", "userfaultfd",
            "perf_event_open", "io_uring_setup", "open_tree", "move_mount", "fsopen", "fsconfig",
            "fsmount", "fspick", "mount_setattr", "kexec_load", "init_module", "finit_module",
            "open_by_handle_at", "name_to_handle_at", "pidfd_getfd"]


def job_filter(notify=("acct",)) -> bytes:
    """A deny list stacked on whatever is inherited. The real one is pysandbox's libseccomp
    program (an allow list, default USER_NOTIF), exported as BPF bytes and handed to the zygote."""
    prog = [_ins(LD_ABS_W, 4), _ins(JEQ, AUDIT_ARCH_X86_64, 1, 0), _ins(RET, RET_KILL_PROCESS),
            _ins(LD_ABS_W, 0), _ins(JGE, 0x40000000, 0, 1), _ins(RET, RET_ERRNO(errno.EPERM))]
    for name in JOB_DENY:
        prog += [_ins(JEQ, NR[name], 0, 1), _ins(RET, RET_ERRNO(errno.EPERM))]
    prog += [_ins(JEQ, NR["clone3"], 0, 1), _ins(RET, RET_ERRNO(errno.ENOSYS))]
    for name in notify:
        prog += [_ins(JEQ, NR[name], 0, 1), _ins(RET, RET_USER_NOTIF)]
    prog += [_ins(JEQ, NR["clone"], 0, 3), _ins(LD_ABS_W, 16),
             _ins(JSET, CLONE_NS_FLAGS, 0, 1), _ins(RET, RET_ERRNO(errno.EPERM)),
             _ins(RET, RET_ALLOW)]
    return b"".join(prog)


def notify_only_filter(name="acct") -> bytes:
    return b"".join([_ins(LD_ABS_W, 0), _ins(JEQ, NR[name], 0, 1), _ins(RET, RET_USER_NOTIF),
                     _ins(RET, RET_ALLOW)])


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def load_filter(prog: bytes, listener: bool, step="seccomp") -> int:
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    SECCOMP_SET_MODE_FILTER, FLAG_NEW_LISTENER = 1, 8
    return check(sys_call("seccomp", SECCOMP_SET_MODE_FILTER, FLAG_NEW_LISTENER if listener else 0,
                          ctypes.byref(fprog)), step, "seccomp(SET_MODE_FILTER%s)" %
                 (", NEW_LISTENER" if listener else ""))


SECCOMP_IOCTL_NOTIF_RECV, SECCOMP_IOCTL_NOTIF_SEND = 0xC0502100, 0xC0182101

# ---------------------------------------------------------------- landlock

LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1, 2, 4, 8
LL_TRUNCATE, LL_IOCTL_DEV = 1 << 14, 1 << 15
LL_READ = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1, 2


def landlock_abi() -> int:
    return libc.syscall(ctypes.c_long(NR["landlock_create_ruleset"]), None, ctypes.c_size_t(0),
                        ctypes.c_uint32(1))


def apply_landlock(abi: int, rules, step="landlock"):
    """rules: [(path, access)]. Writes only beneath /tmp and /dev/shm; reads only where listed."""
    handled = (1 << 16) - 1 if abi >= 5 else (1 << 13) - 1
    attr = struct.pack("QQQ", handled, 0, (SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL) if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16
    rs = check(libc.syscall(ctypes.c_long(NR["landlock_create_ruleset"]), attr,
                            ctypes.c_size_t(size), ctypes.c_uint32(0)), step,
               "landlock_create_ruleset")
    try:
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                beneath = struct.pack("=Qi", access & handled, fd)
                check(libc.syscall(ctypes.c_long(NR["landlock_add_rule"]), rs, 1, beneath, 0),
                      step, f"landlock_add_rule({path})")
            finally:
                os.close(fd)
        check(libc.syscall(ctypes.c_long(NR["landlock_restrict_self"]), rs, 0), step,
              "landlock_restrict_self")
    finally:
        os.close(rs)


DEV_FILE = LL_READ_FILE | LL_WRITE_FILE | LL_TRUNCATE | LL_IOCTL_DEV
LANDLOCK_RULES = [("/usr", LL_READ), ("/etc", LL_READ), ("/proc", LL_READ | LL_WRITE_FILE),
                  ("/dev", LL_READ), ("/dev/null", DEV_FILE), ("/dev/zero", DEV_FILE),
                  ("/dev/full", DEV_FILE), ("/dev/urandom", DEV_FILE), ("/dev/random", DEV_FILE),
                  ("/tmp", (1 << 16) - 1), ("/dev/shm", (1 << 16) - 1)]

# ---------------------------------------------------------------- the zygote


class Zygote:
    def __init__(self, args):
        self.ctrl = socket.socket(fileno=args.fd)
        self.args = args
        self.cap_last = int(open("/proc/sys/kernel/cap_last_cap").read())
        self.abi = landlock_abi()
        self.fork_parent_ns = []
        self.filter = job_filter()

    def prelude(self):
        """Undo what bwrap does that pysandbox's zygote sandbox would not do, then become an
        unprivileged uid 65534 with no capabilities (see the module docstring)."""
        info = {}
        if self.args.keep_proc_covers:
            info["proc_covers"] = "kept"
        else:
            for m in ("/proc/irq", "/proc/bus"):
                check(libc.umount2(m.encode(), MNT_DETACH), "prelude", f"umount2({m})")
            info["proc_covers"] = "unmounted"
        check(libc.unshare(CLONE_NEWUSER), "prelude", "unshare(CLONE_NEWUSER)")
        with open("/proc/self/uid_map", "w") as f:
            f.write("65534 0 1")
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/gid_map", "w") as f:
            f.write("65534 0 1")
        os.setresgid(65534, 65534, 65534)
        os.setresuid(65534, 65534, 65534)
        drop_all_caps(self.cap_last, "prelude")
        if self.args.dumpable0:
            prctl(PR_SET_DUMPABLE, 0)
        if self.args.outer_listener:
            # stands for an outer (zygote) filter that reports denials with USER_NOTIF
            prctl(PR_SET_NO_NEW_PRIVS, 1)
            info["outer_listener_fd"] = load_filter(notify_only_filter("acct"), True, "prelude")
        if self.args.plant:
            # things a job must not see: a file in the zygote's /tmp and /dev/shm, SysV objects,
            # an abstract and a loopback socket in the zygote's network namespace
            for p in ("/tmp/zygote-secret", "/dev/shm/zygote-secret"):
                with open(p, "w") as f:
                    f.write("zygote")
            libc.shmget(0xF5F5, 4096, 0o1600)
            libc.msgget(0xF5F7, 0o1600)
            self.planted = []
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.bind(b"\0fsp-zygote")
                s.listen(8)
                self.planted.append(s)
            except OSError as e:
                info["plant_abstract"] = e.errno
            try:
                t = socket.socket()
                t.bind(("127.0.0.1", 47001))
                t.listen(8)
                self.planted.append(t)
            except OSError as e:
                info["plant_tcp"] = e.errno
        t0 = time.perf_counter()
        for mod in filter(None, self.args.preload.split(",")):
            __import__(mod)
        info["preload_s"] = time.perf_counter() - t0
        if self.args.ballast_mb:
            self.ballast = bytearray(os.urandom(1)) * (self.args.ballast_mb << 20)
        info["rss_kb"] = rss_kb()
        info["pid"] = os.getpid()
        self.uid, self.gid = os.getuid(), os.getgid()
        info["landlock_abi"] = self.abi
        return info

    def serve(self):
        try:
            info = self.prelude()
        except StepError as e:
            self.ctrl.send(json.dumps({"error": e.step, "errno": e.err, "call": e.call}).encode())
            return 125
        ru = resource.getrusage(resource.RUSAGE_SELF)
        info["cpu_after_preload"] = ru.ru_utime + ru.ru_stime
        self.ctrl.send(json.dumps(info).encode())
        sel = selectors.DefaultSelector()
        sel.register(self.ctrl, selectors.EVENT_READ, None)
        while True:
            for key, _ in sel.select():
                if key.data is not None:
                    self.finish(sel, key)
                    continue
                msg, fds, _, _ = socket.recv_fds(self.ctrl, 1 << 16, 8)
                if not msg:
                    return 0
                req = json.loads(msg)
                if req.get("cmd") == "stats":
                    ru = resource.getrusage(resource.RUSAGE_SELF)
                    self.ctrl.send(json.dumps({"cpu": ru.ru_utime + ru.ru_stime,
                                               "fork_parent_ns": self.fork_parent_ns,
                                               "rss_kb": rss_kb()}).encode())
                    self.fork_parent_ns = []
                    continue
                if req.get("clone"):
                    self.clone_job(sel, req, fds)
                    continue
                t0 = now()
                pid = os.fork()
                if pid == 0:
                    try:
                        job_c1(self, req, fds, t0)
                    finally:
                        os._exit(126)
                self.fork_parent_ns.append(now() - t0)
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                sel.register(pidfd, selectors.EVENT_READ, (pid, None, None))

    def finish(self, sel, key):
        """A child of the zygote ended: reap it; in the clone path, report it to the host."""
        pid, jsock, T = key.data
        sel.unregister(key.fileobj)
        os.close(key.fileobj)
        _, status, ru = os.wait4(pid, 0)
        if jsock is not None:
            send_msg(jsock, {"final": True, "status": status, "T": T,
                             "tree_cpu": ru.ru_utime + ru.ru_stime, "tree_user": ru.ru_utime,
                             "tree_sys": ru.ru_stime, "c1_cpu": 0.0, "maxrss_kb": ru.ru_maxrss})
            os.close(jsock)

    def clone_job(self, sel, req, fds):
        """One process fewer: clone(2) straight into the job's namespaces (the child is PID 1 of
        its PID namespace) and write its id maps from here, the parent user namespace. Raw
        clone from Python needs the interpreter's fork hooks around it (PyOS_*Fork*); the GIL
        stays held (PyDLL) so no other thread can hold it at the clone."""
        out_w, err_w, jsock = fds
        rel_r, rel_w = os.pipe()
        t0 = now()
        pyapi.PyOS_BeforeFork()
        flags = JOB_UNSHARE & ~(CLONE_NEWNET if req.get("no_netns") else 0)
        pid = pylibc.syscall(ctypes.c_long(NR["clone"]), ctypes.c_long(flags | signal.SIGCHLD),
                             ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0))
        if pid == 0:
            pyapi.PyOS_AfterFork_Child()

            def child():
                T = {"clone": now() - t0}
                os.close(rel_w)
                t = now()
                os.read(rel_r, 1)
                os.close(rel_r)
                T["wait_maps"] = now() - t
                JOB_FD[0] = jsock
                t = now()
                close_except({out_w, err_w, jsock})
                T["c1_fds"] = now() - t
                job_c2(self, req, out_w, err_w, jsock, None, T)

            run_c2(child)
        err = ctypes.get_errno()
        pyapi.PyOS_AfterFork_Parent()
        self.fork_parent_ns.append(now() - t0)
        os.close(rel_r)
        os.close(out_w)
        os.close(err_w)
        if pid < 0:
            send_msg(jsock, {"error": "clone", "errno": err, "errname": errno.errorcode.get(err),
                             "call": "clone(NEWUSER|NEWNS|NEWPID|NEWIPC|NEWNET|NEWUTS)"})
            os.close(jsock)
            os.close(rel_w)
            return
        t = now()
        T = {}
        try:
            for name, text in (("setgroups", "deny"), ("uid_map", f"{self.uid} {self.uid} 1"),
                               ("gid_map", f"{self.gid} {self.gid} 1")):
                with open(f"/proc/{pid}/{name}", "w") as f:
                    f.write(text)
            os.write(rel_w, b"x")
        except OSError as e:
            send_msg(jsock, {"error": "maps", "errno": e.errno, "call": f"write({name})"})
        os.close(rel_w)
        T["maps"] = now() - t
        sel.register(os.pidfd_open(pid), selectors.EVENT_READ, (pid, jsock, T))


pyapi = ctypes.pythonapi
pylibc = ctypes.PyDLL(None, use_errno=True)
pylibc.syscall.restype = ctypes.c_long


def rss_kb() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def send_msg(sock_fd: int, obj, fds=()):
    s = socket.socket(fileno=os.dup(sock_fd))
    try:
        socket.send_fds(s, [json.dumps(obj).encode()], list(fds))
    finally:
        s.close()


def job_c1(z: Zygote, req, fds, t_fork0):
    T = {"fork1": now() - t_fork0}
    out_w, err_w, jsock = fds
    try:
        t = now()
        close_except({out_w, err_w, jsock})
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        if req.get("dumpable0"):
            prctl(PR_SET_DUMPABLE, 0)
        uid, gid = os.getuid(), os.getgid()
        T["c1_fds"] = now() - t
        t = now()
        check(libc.unshare(JOB_UNSHARE), "unshare", "unshare(USER|NS|PID|IPC|NET|UTS)")
        T["unshare"] = now() - t
        t = now()
        try:
            for path, text in (("/proc/self/setgroups", "deny"),
                               ("/proc/self/uid_map", f"{uid} {uid} 1"),
                               ("/proc/self/gid_map", f"{gid} {gid} 1")):
                with open(path, "w") as f:
                    f.write(text)
        except OSError as e:
            raise StepError("maps", e.errno, f"write({path})")
        T["maps"] = now() - t
        t_f = now()
        pid = os.fork()
        if pid == 0:
            JOB_FD[0] = jsock
            run_c2(lambda: job_c2(z, req, out_w, err_w, jsock, t_f))
        os.close(out_w)
        os.close(err_w)
        _, status, ru = os.wait4(pid, 0)
        me = resource.getrusage(resource.RUSAGE_SELF)
        send_msg(jsock, {"final": True, "status": status, "T": T,
                         "tree_cpu": ru.ru_utime + ru.ru_stime, "tree_user": ru.ru_utime,
                         "tree_sys": ru.ru_stime, "c1_cpu": me.ru_utime + me.ru_stime,
                         "maxrss_kb": ru.ru_maxrss})
        os._exit(0)
    except StepError as e:
        send_msg(jsock, {"error": e.step, "errno": e.err, "errname": errno.errorcode.get(e.err),
                         "call": e.call, "T": T})
        os._exit(125)


JOB_FD = [-1]  # where C2's end of the job socket is now (it moves to fd 3)


def run_c2(body) -> None:
    """Runs a job's C2 and never returns: a step that failed is reported on the job socket and C2
    exits 125; 126 if the body came back (job_c2 ends the job itself)."""
    try:
        body()
    except StepError as e:
        send_msg(JOB_FD[0], {"error": e.step, "errno": e.err,
                             "errname": errno.errorcode.get(e.err), "call": e.call})
        os._exit(125)
    except BaseException:
        send_msg(JOB_FD[0], {"error": "c2", "trace": traceback.format_exc()})
        os._exit(125)
    os._exit(126)


def job_c2(z: Zygote, req, out_w, err_w, jsock, t_f, T=None):
    T = T if T is not None else {"fork2": now() - t_f}
    t = now()
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "pdeathsig")
    # (getppid() is 0 here: C1 is outside this PID namespace. The real init checks that C1 is
    # alive through a pipe from C1 after PR_SET_PDEATHSIG.)
    mount(None, "/", None, MS_REC | MS_PRIVATE, None, "private")
    T["private"] = now() - t
    t = now()
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,nr_inodes=65536,mode=0755",
          "tmpfs")
    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
          "size=64m,nr_inodes=4096,mode=0755", "tmpfs")
    T["tmpfs"] = now() - t
    t = now()
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None, "proc")
    for path in PROC_MASKED:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if os.path.isdir(path):
            mount("masked", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0",
                  "proc_masks")
        else:
            mount("/dev/null", path, None, MS_BIND, None, "proc_masks")
    for path in PROC_READONLY:
        if not os.path.exists(path):
            continue
        mount(path, path, None, MS_BIND | MS_REC, None, "proc_masks")
        mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              None, "proc_masks")
    T["proc"] = now() - t
    t = now()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if req.get("no_netns"):  # measurement only: what the network namespace costs
        s.close()
    else:
      try:
        fcntl.ioctl(s.fileno(), 0x8914, struct.pack("16sH22x", b"lo", 0x1 | 0x8 | 0x40))
      except OSError as e:
        raise StepError("lo", e.errno, "ioctl(SIOCSIFFLAGS, lo, UP)")
      finally:
        s.close()
    T["lo"] = now() - t
    t = now()
    check(libc.sethostname(b"sandbox", 7), "hostname", "sethostname")
    for res, val in ((resource.RLIMIT_NOFILE, 256), (resource.RLIMIT_FSIZE, 64 << 20),
                     (resource.RLIMIT_CORE, 0), (resource.RLIMIT_NPROC, 64),
                     (resource.RLIMIT_CPU, 20), (resource.RLIMIT_AS, 4 << 30)):
        resource.setrlimit(res, (val, val))
    T["hostname_rlimits"] = now() - t
    t = now()
    devnull = os.open("/dev/null", os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    job_fd = JOB_FD[0] = os.dup2(jsock, 3, inheritable=False)
    close_except({3})
    T["fds"] = now() - t
    t = now()
    if z.abi > 0 and not req.get("no_landlock"):
        apply_landlock(z.abi, LANDLOCK_RULES)
    T["landlock"] = now() - t
    t = now()
    prctl(PR_SET_NO_NEW_PRIVS, 1, "caps")
    drop_all_caps(z.cap_last)
    T["nnp_caps"] = now() - t
    t = now()
    listener = -1
    if not req.get("no_seccomp"):
        listener = load_filter(z.filter, True)
    T["seccomp"] = now() - t
    t = now()
    pidfd = check(sys_call("pidfd_open", os.getpid(), 0), "pidfd", "pidfd_open(getpid())")
    tmpfd = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    T["pidfd"] = now() - t
    sock = socket.socket(fileno=job_fd)
    socket.send_fds(sock, [json.dumps({"hello": True, "T": T}).encode()],
                    [pidfd, tmpfd] + ([listener] if listener >= 0 else []))
    os.close(pidfd)
    os.close(tmpfd)
    if listener >= 0:
        os.close(listener)
    code = sock.recv(1 << 20).decode()
    os.chdir("/tmp")
    if req.get("mode", "init") == "pid1":
        sock.close()
        run_job(code)
    # the init is not dumpable, so the job (same uid, same namespace) cannot open /proc/1/mem;
    # the job makes itself dumpable again right after the fork (no window)
    if req.get("init_nondumpable", True):
        prctl(PR_SET_DUMPABLE, 0)
    t = now()
    pid = os.fork()
    if pid == 0:
        prctl(PR_SET_DUMPABLE, 1)
        sock.send(json.dumps({"T": {"fork3": now() - t}}).encode())
        sock.close()
        run_job(code)
    sock.close()
    os.dup2(0, 1)
    os.dup2(0, 2)
    while True:
        try:
            p, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(125)
        if p == pid:
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status)
                     else 128 + os.WTERMSIG(status))


def run_job(code: str):
    import builtins
    sys.argv = ["-c"]
    rc = 0
    try:
        exec(compile(code, "<job>", "exec"), {"__name__": "__main__", "__builtins__": builtins})
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
        rc = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(rc)


# ---------------------------------------------------------------- host side


def zygote_bwrap_cmd(fd: int, preload: str, extra=()):
    return (BWRAP_BASE + ["--uid", "0", "--gid", "0", "--cap-add", "CAP_SYS_ADMIN",
                          "--ro-bind", HERE, "/probe", PYTHON, SELF_IN_SANDBOX, "zygote",
                          "--fd", str(fd), "--preload", preload] + list(extra))


class Job:
    def __init__(self, jid, code, req):
        self.id, self.code, self.req = jid, code, req
        self.out, self.err = bytearray(), bytearray()
        self.final = None
        self.hello = None
        self.error = None
        self.T = {}
        self.pidfd = self.listener = self.tmpfd = None
        self.open = 3
        self.t_submit = time.perf_counter()
        self.t_done = None

    @property
    def status(self):
        if self.final is None:
            return None
        return os.waitstatus_to_exitcode(self.final["status"])


class ForkServer:
    def __init__(self, preload="", extra=(), keep_fds=False):
        self.ctrl, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.t_start = time.perf_counter()
        self.proc = subprocess.Popen(zygote_bwrap_cmd(child.fileno(), preload, extra),
                                     pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL)
        child.close()
        self.info = json.loads(self.ctrl.recv(1 << 16) or b'{"error": "zygote died"}')
        self.startup_s = time.perf_counter() - self.t_start
        self.sel = selectors.DefaultSelector()
        self.inflight = {}
        self.keep_fds = keep_fds
        self.seq = 0
        self.default_req = {}

    def submit(self, code, **req) -> Job:
        req = {**self.default_req, **req}
        self.seq += 1
        job = Job(self.seq, code, req)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        host.send(code.encode())  # queued; only C2 reads it
        socket.send_fds(self.ctrl, [json.dumps(req).encode()], [out_w, err_w, child.fileno()])
        os.close(out_w)
        os.close(err_w)
        child.close()
        job.host = host
        for f, kind in ((out_r, "out"), (err_r, "err"), (host, "sock")):
            self.sel.register(f, selectors.EVENT_READ, (job, kind))
        self.inflight[job.id] = job
        return job

    def poll(self, timeout=None):
        done = []
        for key, _ in self.sel.select(timeout):
            job, kind = key.data
            if kind == "sock":
                try:
                    msg, fds, _, _ = socket.recv_fds(job.host, 1 << 16, 4)
                except ConnectionResetError:
                    # the job's end closed with our code unread (setup failed): the error is
                    # reported once; queued messages and then EOF follow
                    continue
                if not msg:
                    self._close(job, key.fileobj)
                else:
                    m = json.loads(msg)
                    job.T.update(m.get("T", {}))
                    if m.get("hello"):
                        job.hello = m
                        job.pidfd = fds[0] if fds else None
                        job.tmpfd = fds[1] if len(fds) > 1 else None
                        job.listener = fds[2] if len(fds) > 2 else None
                        if not self.keep_fds:
                            for fd in fds:
                                os.close(fd)
                            job.pidfd = job.listener = job.tmpfd = None
                    elif m.get("final"):
                        job.final = m
                    elif m.get("error"):
                        job.error = m
                    for fd in (fds if m.get("hello") is None else ()):
                        os.close(fd)
            else:
                data = os.read(key.fd, 65536)
                if data:
                    (job.out if kind == "out" else job.err).extend(data)
                else:
                    self._close(job, key.fd)
            if job.open == 0 and job.id in self.inflight:
                job.t_done = time.perf_counter()
                del self.inflight[job.id]
                done.append(job)
        return done

    def _close(self, job, f):
        self.sel.unregister(f)
        if isinstance(f, int):
            os.close(f)
        else:
            f.close()
        job.open -= 1

    def wait(self, job):
        while job.id in self.inflight:
            self.poll()
        return job

    def run(self, code, **req):
        return self.wait(self.submit(code, **req))

    def stats(self):
        self.ctrl.send(json.dumps({"cmd": "stats"}).encode())
        return json.loads(self.ctrl.recv(1 << 22))

    def close(self):
        self.ctrl.close()
        self.proc.wait()
        for job in list(self.inflight.values()):
            pass


def cpu_children():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def cpu_self():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def sys_busy() -> float:
    """Seconds of CPU the whole machine spent not idle (all cores), from /proc/stat."""
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) / os.sysconf("SC_CLK_TCK")


def background(seconds=1.0) -> float:
    """The machine's busy CPU per second while we do nothing (another user's load)."""
    b0, t0 = sys_busy(), time.perf_counter()
    time.sleep(seconds)
    return (sys_busy() - b0) / (time.perf_counter() - t0)


def wait_quiet(limit=0.3, patience=90.0) -> float:
    """Wait (at most `patience` s) until the machine's background load is under `limit` CPU."""
    end = time.monotonic() + patience
    while True:
        bg = background(1.0)
        if bg < limit or time.monotonic() > end:
            return bg


class SysCpu:
    """Machine-wide CPU over a run, minus the background rate measured just before it. Counts
    what rusage cannot (bwrap does not reap its sandboxed child with accounting) and the host
    driver too."""

    def __enter__(self):
        self.bg = background()
        self.b0, self.t0 = sys_busy(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        wall = time.perf_counter() - self.t0
        self.total = sys_busy() - self.b0
        self.net = self.total - self.bg * wall
        return False


def run_forkserver(case, n, mode, inflight=2, extra=(), clone=False, **req):
    c = CASES[case]
    sc = SysCpu().__enter__()
    ch0 = cpu_children()
    fs = ForkServer(c["preload"], extra)
    if "error" in fs.info:
        raise RuntimeError(f"zygote: {fs.info}")
    me0 = cpu_self()
    t0 = time.perf_counter()
    jobs, done, submitted = [], 0, 0
    while done < n:
        while submitted < n and len(fs.inflight) < inflight:
            jobs.append(fs.submit(c["code"], mode=mode, clone=clone, **req))
            submitted += 1
        done += len(fs.poll())
    wall = time.perf_counter() - t0
    me1 = cpu_self()
    st = fs.stats()
    fs.close()
    ch1 = cpu_children()
    sc.__exit__()
    bad = [j for j in jobs if j.status != 0 or (c["expect"] and j.out.decode().strip() != c["expect"])]
    if bad:
        j = bad[0]
        raise RuntimeError(f"fork server job failed: {j.final} {j.error} {j.err[-500:]!r}")
    per_job = [j.final["tree_cpu"] + j.final["c1_cpu"] for j in jobs]
    zygote_cpu = st["cpu"] - fs.info["cpu_after_preload"]
    return {"method": f"forkserver-{'clone' if clone else 'fork'}-{mode}", "case": case, "jobs": n, "wall_s": wall,
            "jobs_per_s": n / wall,
            "cpu_ms_per_job": 1000 * (sum(per_job) + zygote_cpu) / n,
            "cpu_ms_per_job_incl_startup": 1000 * (ch1 - ch0) / n,
            "sys_cpu_ms_per_job": 1000 * sc.net / n, "background_cpu_per_s": sc.bg,
            "driver_cpu_ms_per_job": 1000 * (me1 - me0) / n,
            "zygote_startup_s": fs.startup_s, "zygote_rss_kb": fs.info["rss_kb"],
            "zygote_startup_cpu_s": fs.info["cpu_after_preload"],
            "steps_us": {k: statistics.median(j.T[k] for j in jobs if k in j.T) / 1000
                         for k in jobs[0].T},
            "fork_parent_us": statistics.median(st["fork_parent_ns"]) / 1000}


def run_xargs(method, case, n, inflight=2):
    c = CASES[case]
    if method == "cold-bwrap":
        # --as-pid-1: otherwise bwrap's init reaps python without the CPU reaching our rusage
        cmd = BWRAP_BASE + ["--uid", "65534", "--gid", "65534", "--as-pid-1", PYTHON, "-c",
                            c["code"]]
    elif method == "pysandbox-run":
        cmd = [PYSANDBOX, "run", "-p", "default" if case == "sum" else "datascience", "-c",
               c["code"]]
    else:
        raise ValueError(method)
    with SysCpu() as sc:
        ch0 = cpu_children()
        t0 = time.perf_counter()
        out = subprocess.run(["xargs", "-P", str(inflight), "-I{}"] + cmd,
                             input=("x\n" * n).encode(), capture_output=True).stdout
        wall = time.perf_counter() - t0
        ch1 = cpu_children()
    lines = out.decode().split()
    if len(lines) != n or (c["expect"] and set(lines) != {c["expect"]}):
        raise RuntimeError(f"{method}: {len(lines)} lines for {n} jobs: {set(lines)}")
    return {"method": method, "case": case, "jobs": n, "wall_s": wall, "jobs_per_s": n / wall,
            "cpu_ms_per_job": 1000 * (ch1 - ch0) / n,
            "sys_cpu_ms_per_job": 1000 * sc.net / n, "background_cpu_per_s": sc.bg}


def bench(args):
    methods = ["forkserver-fork-init", "forkserver-fork-pid1", "forkserver-clone-init",
               "forkserver-clone-pid1", "cold-bwrap"]
    if os.access(PYSANDBOX, os.X_OK):
        methods.append("pysandbox-run")
    rows = []
    for case in args.cases.split(","):
        for r in range(args.rounds):
            for m in methods:
                if args.wait_quiet:
                    wait_quiet(patience=args.wait_quiet)
                if m.startswith("forkserver"):
                    _, how, mode = m.split("-")
                    row = run_forkserver(case, args.jobs, mode, clone=how == "clone")
                else:
                    n = args.jobs if case == "sum" else args.cold_pandas_jobs
                    row = run_xargs(m, case, n)
                row["round"] = r
                rows.append(row)
                print(f"  {case:6} round {r} {m:21} {row['jobs']:5} jobs {row['jobs_per_s']:7.1f} "
                      f"jobs/s  {row['cpu_ms_per_job']:7.2f} ms CPU/job (process tree)  "
                      f"machine-wide {row['sys_cpu_ms_per_job']:7.2f}  "
                      f"(background {row['background_cpu_per_s']:.2f} CPU)", flush=True)
    summary = {}
    for case in args.cases.split(","):
        for m in methods:
            rs = [r for r in rows if r["case"] == case and r["method"] == m]
            if not rs:
                continue
            jps = [r["jobs_per_s"] for r in rs]
            cpu = [r["cpu_ms_per_job"] for r in rs]
            summary[f"{case}/{m}"] = {
                "jobs": rs[0]["jobs"], "jobs_per_s_median": statistics.median(jps),
                "jobs_per_s_range": [min(jps), max(jps)],
                "cpu_ms_per_job_median": statistics.median(cpu),
                "cpu_ms_per_job_range": [min(cpu), max(cpu)],
                "background_cpu_per_s": [round(r["background_cpu_per_s"], 3) for r in rs]}
            mw = [r["sys_cpu_ms_per_job"] for r in rs]
            summary[f"{case}/{m}"]["machine_cpu_ms_per_job_median"] = statistics.median(mw)
            summary[f"{case}/{m}"]["machine_cpu_ms_per_job_range"] = [min(mw), max(mw)]
            if m.startswith("forkserver"):
                summary[f"{case}/{m}"]["cpu_ms_per_job_incl_startup_median"] = statistics.median(
                    r["cpu_ms_per_job_incl_startup"] for r in rs)
                summary[f"{case}/{m}"]["driver_cpu_ms_per_job_median"] = statistics.median(
                    r["driver_cpu_ms_per_job"] for r in rs)
                summary[f"{case}/{m}"]["zygote_startup_s_median"] = statistics.median(
                    r["zygote_startup_s"] for r in rs)
    return {"rows": rows, "summary": summary}


def steps(args):
    """Per-step cost (sequential jobs, 1 in flight, so steps do not contend) and fork cost
    against zygote RSS."""
    out = {"steps": {}, "fork_vs_rss": []}
    for case in ("sum", "pandas"):
        for clone, mode in ((False, "init"), (False, "pid1"), (True, "init"), (True, "pid1")):
            row = run_forkserver(case, args.step_jobs, mode, inflight=1, clone=clone)
            out["steps"][f"{case}/{row['method']}"] = {"steps_us": row["steps_us"],
                                              "fork_parent_us": row["fork_parent_us"],
                                              "cpu_ms_per_job": row["cpu_ms_per_job"],
                                              "machine_cpu_ms_per_job": row["sys_cpu_ms_per_job"],
                                              "zygote_rss_kb": row["zygote_rss_kb"],
                                              "wall_ms_per_job": 1000 * row["wall_s"] / row["jobs"]}
            print(f"  steps {case}/{row['method']}: " + ", ".join(
                f"{k} {v:.0f}" for k, v in row["steps_us"].items()) + " (us, median)", flush=True)
    row = run_forkserver("sum", args.step_jobs, "pid1", inflight=1, clone=True, no_netns=True)
    out["steps"]["sum/forkserver-clone-pid1-without-netns (measurement only)"] = {
        "steps_us": row["steps_us"], "fork_parent_us": row["fork_parent_us"],
        "cpu_ms_per_job": row["cpu_ms_per_job"], "machine_cpu_ms_per_job": row["sys_cpu_ms_per_job"],
        "wall_ms_per_job": 1000 * row["wall_s"] / row["jobs"]}
    print(f"  without netns: {out['steps']['sum/forkserver-clone-pid1-without-netns (measurement only)']}")
    for ballast in (0, 256, 1024, 2048):
        row = run_forkserver("sum", args.step_jobs, "pid1", inflight=1, clone=True,
                             extra=["--ballast-mb", str(ballast)])
        out["fork_vs_rss"].append({"ballast_mb": ballast, "zygote_rss_kb": row["zygote_rss_kb"],
                                   "fork_parent_us": row["fork_parent_us"],
                                   "clone_child_us": row["steps_us"]["clone"],
                                   "cpu_ms_per_job": row["cpu_ms_per_job"],
                                   "machine_cpu_ms_per_job": row["sys_cpu_ms_per_job"],
                                   "wall_ms_per_job": 1000 * row["wall_s"] / row["jobs"]})
        print(f"  fork vs RSS: {out['fork_vs_rss'][-1]}", flush=True)
    return out


# ---------------------------------------------------------------- containment checks

def proc_comms():
    res = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                res[int(p)] = open(f"/proc/{p}/comm").read().strip()
            except OSError:
                pass
    return res


PRELUDE = r"""
import ctypes, os, json, socket, errno, signal, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
R = {}
def tryit(name, fn):
    try:
        R[name] = fn()
    except OSError as e:
        R[name] = "errno:" + errno.errorcode.get(e.errno, str(e.errno))
    except Exception as e:
        R[name] = "exc:" + type(e).__name__ + ":" + str(e)
def rc(v):
    return v if v >= 0 else "errno:" + errno.errorcode.get(ctypes.get_errno(), "?")
"""

ATTACKER = PRELUDE + r"""
R['pids'] = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
R['fds'] = sorted(int(f) for f in os.listdir('/proc/self/fd'))
st = dict(l.split(':\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\t' in l)
R['status'] = {k: st[k].strip() for k in ('Uid', 'CapEff', 'CapPrm', 'CapInh', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp', 'Seccomp_filters', 'NSpid')}
tryit('kcore', lambda: len(open('/proc/kcore', 'rb').read(64)))
tryit('kallsyms', lambda: len(open('/proc/kallsyms', 'rb').read(64)))
tryit('timer_list', lambda: len(open('/proc/timer_list', 'rb').read(64)))
tryit('interrupts', lambda: len(open('/proc/interrupts', 'rb').read(64)))
tryit('acpi', lambda: os.listdir('/proc/acpi'))
tryit('keys', lambda: len(open('/proc/keys', 'rb').read(64)))
tryit('proc_sys_write', lambda: open('/proc/sys/kernel/hostname', 'w').write('x'))
tryit('proc_sysrq_write', lambda: open('/proc/sysrq-trigger', 'w').write('h'))
tryit('hostpid_mem', lambda: len(open('/proc/%d/mem' % HOSTPID, 'rb').read(1)))
tryit('zygote_pid_kill0', lambda: os.kill(ZPID, 0))
tryit('ptrace_attach_1', lambda: rc(libc.ptrace(16, 1, None, None)))
tryit('process_vm_readv', lambda: rc(libc.syscall(310, 1, None, 0, None, 0, 0)))
tryit('unshare_user', lambda: rc(libc.unshare(0x10000000)))
tryit('unshare_ns', lambda: rc(libc.unshare(0x20000)))
tryit('clone_newuser', lambda: rc(libc.syscall(56, 0x10000000 | 17, None, None, None, 0)))
tryit('clone3', lambda: rc(libc.syscall(435, None, 0)))
tryit('mount_tmpfs', lambda: rc(libc.mount(b'x', b'/tmp', b'tmpfs', 0, None)))
tryit('setns', lambda: rc(libc.setns(os.open('/proc/self/ns/user', os.O_RDONLY), 0)))
tryit('bpf', lambda: rc(libc.syscall(321, 0, None, 0)))
tryit('keyctl', lambda: rc(libc.syscall(250, 0, 0, 0, 0, 0)))
tryit('read_probe_file', lambda: len(open('/probe/forkserver_probe.py').read(10)))
tryit('write_usr', lambda: open('/usr/fsp-x', 'w').write('x'))
tryit('tmp_zygote_secret', lambda: open('/tmp/zygote-secret').read())
tryit('shm_zygote_secret', lambda: open('/dev/shm/zygote-secret').read())
tryit('tmp_sibling_secret', lambda: open('/tmp/sib-secret').read())
tryit('devshm_sibling_secret', lambda: open('/dev/shm/sib-secret').read())
tryit('sysv_shm_zygote', lambda: rc(libc.shmget(0xF5F5, 0, 0)))
tryit('sysv_msg_zygote', lambda: rc(libc.msgget(0xF5F7, 0)))
tryit('sysv_msg_sibling', lambda: rc(libc.msgget(0xF5F6, 0)))
def conn(addr, fam=socket.AF_UNIX):
    s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(1); s.connect(addr); s.close(); return 'connected'
tryit('abstract_sibling', lambda: conn(b'\0fsp-sib'))
tryit('abstract_zygote', lambda: conn(b'\0fsp-zygote'))
tryit('tcp_sibling', lambda: conn(('127.0.0.1', 47000), socket.AF_INET))
tryit('tcp_zygote', lambda: conn(('127.0.0.1', 47001), socket.AF_INET))
tryit('kill_minus1', lambda: os.kill(-1, signal.SIGKILL) or 'sent')
tryit('hostname', lambda: socket.gethostname())
print(json.dumps(R))
"""

SIBLING = PRELUDE + r"""
import select, time
ctypes.CDLL(None).prctl(15, b'fsp-sibling', 0, 0, 0)
open('/tmp/sib-secret', 'w').write('s'); open('/dev/shm/sib-secret', 'w').write('s')
R['msgget_own'] = rc(libc.msgget(0xF5F6, 0o1600))
a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); a.bind(b'\0fsp-sib'); a.listen(8)
t = socket.socket(); t.bind(('127.0.0.1', 47000)); t.listen(8)
tryit('control_abstract_self', lambda: (socket.socket(socket.AF_UNIX).connect(b'\0fsp-sib'), 'connected')[1])
if R['control_abstract_self'] == 'connected':
    a.accept()[0].close()
print('READY', flush=True)
got = 0
end = time.time() + DURATION
while time.time() < end:
    r, _, _ = select.select([a, t], [], [], 0.1)
    for s in r:
        s.accept()[0].close(); got += 1
R['connections_from_others'] = got
R['msgget_own_after'] = rc(libc.msgget(0xF5F6, 0))
print(json.dumps(R))
"""

LEAKER = r"""
import os, ctypes, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(15, b'fsp-leak', 0, 0, 0)
        os.close(1); os.close(2)
        time.sleep(60)
    os._exit(0)
print('parent exits')
"""

SLEEPER = r"""
import os, ctypes, time
if os.fork() == 0:
    ctypes.CDLL(None).prctl(15, b'fsp-sleep-child', 0, 0, 0)
    time.sleep(60); os._exit(0)
ctypes.CDLL(None).prctl(15, b'fsp-sleeper', 0, 0, 0)
print('sleeping', flush=True)
time.sleep(60)
"""

ACCT = r"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long
print(libc.syscall(163, None), ctypes.get_errno())
"""

MEMSCAN = r"""
import hashlib, json, re
# LITERAL
target, found, scanned = 'TARGET', 0, 0
mem = open('/proc/self/mem', 'rb', buffering=0)
for line in open('/proc/self/maps').read().splitlines():
    parts = line.split()
    lo, hi = (int(x, 16) for x in parts[0].split('-'))
    if parts[1][0] != 'r' or hi - lo > (512 << 20) or (len(parts) > 5 and parts[5] in ('[vvar]', '[vsyscall]', '[vvar_vclock]')):
        continue
    try:
        mem.seek(lo)
        data = mem.read(hi - lo)
    except OSError:
        continue
    scanned += len(data)
    for m in re.finditer(rb'SECRET-([0-9a-f]{16})', data):
        if hashlib.sha256(m.group(1)).hexdigest() == target:
            found += 1
print(json.dumps({'found': found, 'scanned_mb': scanned >> 20}))
"""

SHARED_STATE = r"""
import json, random, os
r = {'hash': hash('fork-server'), 'random': random.random(), 'urandom': os.urandom(8).hex()}
try:
    import numpy
    r['numpy_random'] = float(numpy.random.random())
except ImportError:
    pass
print(json.dumps(r))
"""


class Checks:
    def __init__(self):
        self.results = []

    def add(self, name, ok, evidence, claim=True):
        self.results.append({"check": name, "ok": bool(ok), "evidence": evidence,
                             "containment": claim})
        print(f"  [{'PASS' if ok else 'FAIL'}] {name}: {json.dumps(evidence)[:300]}", flush=True)


def job_json(job):
    try:
        return json.loads(job.out.decode().strip().splitlines()[-1])
    except Exception:
        return {"raw_out": job.out.decode()[-300:], "raw_err": job.err.decode()[-800:],
                "final": job.final, "error": job.error}


def leak_scan(names=("fsp-leak", "fsp-sleep-child", "fsp-sleeper", "fsp-sibling")):
    return {pid: c for pid, c in proc_comms().items() if c in names}


def checks(args):
    C = Checks()
    # 0. bwrap as the outer sandbox, unchanged: does a nested proc mount work?
    fs = ForkServer("", ["--keep-proc-covers"])
    j = fs.run("print('x')")
    C.add("nested proc mount with bwrap's /proc covers kept (expected to fail)",
          j.error is not None and j.error.get("error") == "proc" and j.error["errno"] == errno.EPERM,
          j.error or j.final, claim=False)
    fs.close()

    for clone, mode in ((False, "init"), (False, "pid1"), (True, "init"), (True, "pid1")):
        fs = ForkServer("numpy", ["--plant"], keep_fds=True)
        fs.default_req = {"clone": clone}
        tag = f"{'clone' if clone else 'fork'}-{mode}"
        zpid = fs.info["pid"]
        hostpid = os.getpid()
        j = fs.run("print('ok')", mode=mode)
        C.add(f"[{tag}] nested proc mount inside bwrap (covers unmounted by the prelude)",
              j.status == 0 and j.out == b"ok\n", {"final": j.final, "error": j.error},
              claim=False)
        for fd in (j.pidfd, j.listener, j.tmpfd):
            if fd is not None:
                os.close(fd)
        # a sibling that listens and writes, then the attacker, concurrently
        sib = fs.submit(SIBLING.replace("DURATION", "2.5"), mode=mode)
        while b"READY" not in sib.out and sib.id in fs.inflight:
            fs.poll(1)
        sib_host = [p for p, c in proc_comms().items() if c == "fsp-sibling"]
        code = ATTACKER.replace("HOSTPID", str(sib_host[0] if sib_host else 1)).replace(
            "ZPID", str(zpid))
        att = fs.wait(fs.submit(code, mode=mode))
        fs.wait(sib)
        R, S = job_json(att), job_json(sib)
        own = {"init": [1, 2], "pid1": [1]}[mode]
        C.add(f"[{tag}] job sees only its own PID namespace in /proc", R.get("pids") == own,
              {"pids": R.get("pids"), "NSpid": R.get("status", {}).get("NSpid")})
        C.add(f"[{tag}] job holds no fd but 0, 1, 2 (+ the listdir fd)",
              R.get("fds") == [0, 1, 2, 3], R.get("fds"))
        st = R.get("status", {})
        C.add(f"[{tag}] no capabilities, no_new_privs, seccomp on, uid 65534",
              all(st.get(k) == "0000000000000000" for k in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"))
              and st.get("NoNewPrivs") == "1" and st.get("Seccomp") == "2"
              and st.get("Uid", "").split()[0] == "65534", st)
        masks = ("kcore", "kallsyms", "timer_list", "interrupts", "acpi", "keys")
        C.add(f"[{tag}] masked /proc entries read empty (ENOENT: not in this kernel)",
              all(R.get(k) in (0, [], "errno:ENOENT") for k in masks)
              and any(R.get(k) in (0, []) for k in masks),
              {k: R.get(k) for k in masks})
        C.add(f"[{tag}] /proc/sys is read-only", R.get("proc_sys_write") == "errno:EROFS",
              R.get("proc_sys_write"))
        C.add(f"[{tag}] sibling's /proc/<host pid>/mem and zygote pid unreachable",
              str(R.get("hostpid_mem")).startswith("errno:ENOENT")
              and (R.get("zygote_pid_kill0") == "errno:ESRCH" or zpid in R.get("pids", [])),
              {"hostpid": sib_host, "mem": R.get("hostpid_mem"), "zygote_pid": zpid,
               "kill0": R.get("zygote_pid_kill0") or "ok (that number is the job's own)"})
        denied = {k: R.get(k) for k in ("ptrace_attach_1", "process_vm_readv", "unshare_user",
                                          "unshare_ns", "clone_newuser", "mount_tmpfs", "setns",
                                          "bpf", "keyctl")}
        C.add(f"[{tag}] stacked filter denies ptrace, process_vm_readv, unshare, clone(NEW*), "
              "mount, setns, bpf, keyctl with EPERM; clone3 ENOSYS",
              all(v == "errno:EPERM" for v in denied.values()) and R.get("clone3") == "errno:ENOSYS",
              dict(denied, clone3=R.get("clone3")))
        C.add(f"[{tag}] Landlock applies after the mounts: /probe (mounted, not in the rules) "
              "unreadable", R.get("read_probe_file") == "errno:EACCES", R.get("read_probe_file"))
        C.add(f"[{tag}] zygote's and sibling's /tmp and /dev/shm files invisible",
              all(str(R.get(k)).startswith("errno:ENOENT") for k in
                  ("tmp_zygote_secret", "shm_zygote_secret", "tmp_sibling_secret",
                   "devshm_sibling_secret")),
              {k: R.get(k) for k in ("tmp_zygote_secret", "shm_zygote_secret",
                                     "tmp_sibling_secret", "devshm_sibling_secret")})
        C.add(f"[{tag}] SysV IPC of zygote and sibling invisible (sibling's own control works)",
              all(R.get(k) == "errno:ENOENT" for k in ("sysv_shm_zygote", "sysv_msg_zygote",
                                                        "sysv_msg_sibling"))
              and isinstance(S.get("msgget_own_after"), int),
              {k: R.get(k) for k in ("sysv_shm_zygote", "sysv_msg_zygote", "sysv_msg_sibling")}
              | {"sibling_own": S.get("msgget_own_after")})
        C.add(f"[{tag}] sibling and zygote unreachable over abstract unix and 127.0.0.1 "
              "(sibling's self-connect control works)",
              all(str(R.get(k)).startswith("errno:") for k in
                  ("abstract_sibling", "abstract_zygote", "tcp_sibling", "tcp_zygote"))
              and S.get("connections_from_others") == 0
              and S.get("control_abstract_self") == "connected",
              {k: R.get(k) for k in ("abstract_sibling", "abstract_zygote", "tcp_sibling",
                                     "tcp_zygote")} | {"sibling": S})
        C.add(f"[{tag}] kill(-1, SIGKILL) by a job spares the sibling and the zygote",
              sib.status == 0 and "connections_from_others" in S and fs.proc.poll() is None
              and fs.run("print(1)", mode=mode).status == 0,
              {"attacker": R.get("kill_minus1"), "attacker_status": att.status,
               "sibling_status": sib.status})
        C.add(f"[{tag}] hostname is the job's own", R.get("hostname") == "sandbox",
              R.get("hostname"), claim=False)
        # leftovers
        t = time.perf_counter()
        lk = fs.run(LEAKER, mode=mode)
        eof_ms = 1000 * (time.perf_counter() - t)
        time.sleep(0.2)
        left = leak_scan()
        C.add(f"[{tag}] a job that double-forks a setsid child and exits leaves nothing running "
              "(host /proc scan)", lk.status == 0 and not left,
              {"status": lk.status, "left": left, "job_wall_ms": round(eof_ms, 1)})
        # host kills a running job through the pidfd it received
        sl = fs.submit(SLEEPER, mode=mode)
        while b"sleeping" not in sl.out and sl.id in fs.inflight:
            fs.poll(1)
        before = leak_scan()
        t = time.perf_counter()
        signal.pidfd_send_signal(sl.pidfd, signal.SIGKILL)
        fs.wait(sl)
        kill_ms = 1000 * (time.perf_counter() - t)
        time.sleep(0.1)
        C.add(f"[{tag}] host kills a job and its child with pidfd_send_signal on the received "
              "pidfd", bool(before) and not leak_scan() and kill_ms < 1000,
              {"running_before": before, "after": leak_scan(), "ms": round(kill_ms, 1),
               "status": sl.status})
        for fd in (sl.pidfd, sl.listener, sl.tmpfd):
            if fd is not None:
                os.close(fd)
        # the job's seccomp listener, handed to the host
        ac = fs.submit(ACCT, mode=mode)
        while ac.listener is None and ac.id in fs.inflight:
            fs.poll(1)
        served = {}
        if ac.listener is not None:
            def serve(fd=ac.listener):
                buf = bytearray(80)
                fcntl.ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, buf, True)
                nid, pid, _, nr = struct.unpack_from("QIIi", buf)
                served.update(nr=nr, pid=pid)
                fcntl.ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, struct.pack("QqiI", nid, 4242, 0, 0))
            th = threading.Thread(target=serve, daemon=True)
            th.start()
        fs.wait(ac)
        C.add(f"[{tag}] the job's seccomp listener fd reaches the host (host answers acct() "
              "with 4242)", ac.out.split()[:1] == [b"4242"] and served.get("nr") == NR["acct"],
              {"out": ac.out.decode().strip(), "served": served}, claim=False)
        for fd in (ac.pidfd, ac.listener, ac.tmpfd):
            if fd is not None:
                os.close(fd)
        if mode == "init":
            probe = PRELUDE + "tryit('m', lambda: len(open('/proc/1/mem', 'rb', 0).read(0)) or 'opened')\nprint(R['m'])"
            nd = fs.run(probe, mode=mode).out.decode().strip()
            dd = fs.run(probe, mode=mode, init_nondumpable=False).out.decode().strip()
            C.add(f"[{tag}] the job cannot open its init's /proc/1/mem when the init is not dumpable "
                  "(control: it can when the init is dumpable)",
                  nd.startswith("errno:") and dd == "opened",
                  {"init_nondumpable": nd, "init_dumpable": dd})
        # artifacts: the job's /tmp outlives the job through the directory fd its init sent
        aj = fs.run("import os\nos.makedirs('/tmp/work')\nopen('/tmp/work/out.csv', 'w')"
                    ".write('a,b\\n1,2\\n')\nos.symlink('/etc/passwd', '/tmp/work/link')\n"
                    "print('done')", mode=mode)
        got = {}
        try:
            time.sleep(0.05)
            wd = os.open("work", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=aj.tmpfd)
            got["files"] = sorted(os.listdir(wd))
            fd = os.open("out.csv", os.O_RDONLY | os.O_NOFOLLOW, dir_fd=wd)
            got["out.csv"] = os.read(fd, 100).decode()
            os.close(fd)
            try:
                os.open("link", os.O_RDONLY | os.O_NOFOLLOW, dir_fd=wd)
                got["link"] = "followed"
            except OSError as e:
                got["link"] = errno.errorcode[e.errno]
            os.close(wd)
        except (OSError, TypeError) as e:
            got["error"] = repr(e)
        finally:
            for fd in (aj.pidfd, aj.listener, aj.tmpfd):
                if fd is not None:
                    os.close(fd)
        C.add(f"[{tag}] after the job ended, the host reads /tmp/work through the /tmp fd the "
              "init sent (O_NOFOLLOW refuses the job's symlink)",
              aj.status == 0 and got.get("out.csv") == "a,b\n1,2\n" and got.get("link") == "ELOOP",
              got, claim=False)
        # a later job must not find an earlier job's code in its (inherited) memory
        secret = os.urandom(8).hex()
        target = __import__("hashlib").sha256(secret.encode()).hexdigest()
        first = job_json(fs.run(MEMSCAN.replace("TARGET", target).replace(
            "# LITERAL", f"s = 'SECRET-{secret}'"), mode=mode))
        later = job_json(fs.run(MEMSCAN.replace("TARGET", target), mode=mode))
        C.add(f"[{tag}] a later job finds no trace of an earlier job's code in its memory "
              "(control: the earlier job finds its own)",
              first.get("found", 0) >= 1 and later.get("found") == 0,
              {"earlier_job_self_scan": first, "later_job_scan": later})
        # state shared by every fork of one zygote
        a, b = job_json(fs.run(SHARED_STATE, mode=mode)), job_json(fs.run(SHARED_STATE, mode=mode))
        C.add(f"[{tag}] jobs do not share hash seed / numpy RNG state (expected to fail: "
              "a risk, not a containment breach)",
              a.get("hash") != b.get("hash") and a.get("numpy_random") != b.get("numpy_random"),
              {"a": a, "b": b}, claim=False)
        fs.close()

    # signals from the host to PID 1 of the job's namespace
    fs = ForkServer("", keep_fds=True)
    for mode in ("pid1", "init"):
        j = fs.submit("import time\nprint('up', flush=True)\ntime.sleep(2)\nprint('done')",
                      mode=mode, clone=True)
        while b"up" not in j.out and j.id in fs.inflight:
            fs.poll(1)
        signal.pidfd_send_signal(j.pidfd, signal.SIGTERM)
        fs.wait(j)
        C.add(f"[clone-{mode}] SIGTERM from the host to the job's PID 1 is ignored (default "
              "disposition; only SIGKILL/SIGSTOP get through), so an init must forward it",
              j.status == 0 and j.out.endswith(b"done\n"),
              {"status": j.status, "out": j.out.decode()}, claim=False)
        for fd in (j.pidfd, j.listener, j.tmpfd):
            if fd is not None:
                os.close(fd)
    fs.close()
    # without the stacked filter, could a job make a user namespace again? (shows the filter is
    # what denies it)
    fs = ForkServer("")
    j = fs.run(PRELUDE + "print(rc(libc.unshare(0x10000000)))", no_seccomp=True)
    C.add("control: without the job filter, unshare(CLONE_NEWUSER) succeeds (so the filter is "
          "load-bearing)", j.out.strip() == b"0", j.out.decode().strip(), claim=False)
    j = fs.run(PRELUDE + "tryit('p', lambda: len(open('/probe/forkserver_probe.py').read(10)))\n"
               "print(R['p'])", no_landlock=True)
    C.add("control: without Landlock, /probe is readable (so Landlock is what denies it)",
          j.out.strip() == b"10", j.out.decode().strip(), claim=False)
    j = fs.run("print('ok')", dumpable0=True)
    C.add("zygote non-dumpable (PR_SET_DUMPABLE 0 in C1): does job setup still work?",
          j.status == 0, {"final": j.final, "error": j.error}, claim=False)
    fs.close()
    fs = ForkServer("", ["--dumpable0"])
    j = fs.run("print('ok')")
    C.add("zygote started non-dumpable: does job setup still work?", j.status == 0,
          {"final": j.final, "error": j.error}, claim=False)
    fs.close()
    # an outer filter with a listener (pysandbox reports denials with USER_NOTIF)
    fs = ForkServer("", ["--outer-listener"])
    j = fs.run("print('ok')")
    C.add("outer (zygote) filter holding a USER_NOTIF listener: job's NEW_LISTENER fails "
          "(expected EBUSY)", j.error is not None and j.error.get("errno") == errno.EBUSY,
          j.error or j.final, claim=False)
    fs.close()
    return C.results


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["all", "checks", "steps", "bench", "zygote"])
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--cold-pandas-jobs", type=int, default=100)
    p.add_argument("--step-jobs", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cases", default="sum,pandas")
    p.add_argument("--out", default="forkserver-probe.json")
    p.add_argument("--wait-quiet", type=float, default=90.0,
                   help="before each measured run, wait up to this many seconds for the machine's "
                        "background load to drop under 0.3 CPU (0: do not wait)")
    # zygote options
    p.add_argument("--fd", type=int)
    p.add_argument("--preload", default="")
    p.add_argument("--ballast-mb", type=int, default=0)
    p.add_argument("--keep-proc-covers", action="store_true")
    p.add_argument("--outer-listener", action="store_true")
    p.add_argument("--dumpable0", action="store_true")
    p.add_argument("--plant", action="store_true")
    args = p.parse_args()
    if args.what == "zygote":
        return Zygote(args).serve()
    if not shutil.which("bwrap"):
        sys.exit("bwrap not found")
    result = {"kernel": os.uname().release, "nproc": os.cpu_count(), "pysandbox": PYSANDBOX}
    if args.what in ("all", "checks"):
        print("containment checks:")
        result["checks"] = checks(args)
    if args.what in ("all", "steps"):
        print("step costs:")
        result["steps"] = steps(args)
    if args.what in ("all", "bench"):
        print("throughput:")
        result["bench"] = bench(args)
        for k, v in result["bench"]["summary"].items():
            print(f"  {k:28} {v['jobs']:5} jobs: {v['jobs_per_s_median']:7.1f} jobs/s "
                  f"[{v['jobs_per_s_range'][0]:.1f}..{v['jobs_per_s_range'][1]:.1f}]  "
                  f"{v['cpu_ms_per_job_median']:6.2f} ms CPU/job "
                  f"[{v['cpu_ms_per_job_range'][0]:.2f}..{v['cpu_ms_per_job_range'][1]:.2f}]"
                  f"  machine-wide {v['machine_cpu_ms_per_job_median']:.2f} "
                  f"[{v['machine_cpu_ms_per_job_range'][0]:.2f}..{v['machine_cpu_ms_per_job_range'][1]:.2f}]"
                  f"  background {v['background_cpu_per_s']}")
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
