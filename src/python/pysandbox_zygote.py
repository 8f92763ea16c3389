"""pysandbox's fork server (`pysandbox batch --fork`, experimental): a warm interpreter, itself in
a pysandbox sandbox, that imports the profile's [python] preload once and then clones one fresh
sandbox per job (docs/forkserver-probe.md; the supervisor's side is src/fork_server.cpp).

The zygote serves the supervisor over a SOCK_SEQPACKET channel (argv[1]). Per job it receives one
JSON request (the job's layers, decided by the supervisor's plan: rlimits, Landlock rules, /proc
masks, tmpfs options, hostname, environment, the seccomp program as BPF bytes) with the job's
stdout and stderr pipes, its end of a per-job socket and, with a [policy], the audit channel.
It clones straight into new user, mount, PID, IPC, network and UTS namespaces, writes the child's
id maps from outside, releases it, and later reports its exit status and rusage. It never reads a
job's socket, so it never holds a job's code or data.

The child (the job, PID 1 of its namespace) sets itself up in DESIGN.md's order and seccomp last,
sends the supervisor a pidfd of itself, a descriptor of /tmp/work and the seccomp listener, and
only then receives its code. A step that fails is reported as {step, errno, call} and the job
exits 125 without running anything: no job code ever runs with a layer missing.

The steps are ctypes calls here; a native helper built from child.cpp's steps is the intended
next step (docs/forkserver-status.md).
"""

import ctypes
import json
import os
import selectors
import signal
import socket
import sys

SYS = {"clone": 56, "seccomp": 317, "pidfd_open": 434, "landlock_create_ruleset": 444,
       "landlock_add_rule": 445, "landlock_restrict_self": 446, "capset": 126, "capget": 125}
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
JOB_NAMESPACES = (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS
                  | CLONE_NEWCGROUP)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_CAPBSET_READ, PR_CAPBSET_DROP = 1, 23, 24
PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 28, 38, 47
PR_CAP_AMBIENT_IS_SET, PR_CAP_AMBIENT_CLEAR_ALL = 1, 4
# caps.cpp's kSecureBits: NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE, locked
SECURE_BITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER = 1, 8
LANDLOCK_RULE_PATH_BENEATH = 1
LANDLOCK_FILE_RIGHTS = 1 | 2 | 4 | (1 << 14)  # execute, write, read, truncate
SIOCSIFFLAGS, IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x8914, 0x1, 0x8, 0x40
POLICY_FD, JOB_FD, REPORT_FD = 4, 3, 5
PR_SET_DUMPABLE = 4
MAX_REQUEST = 1 << 20

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                       ctypes.c_char_p]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                       ctypes.c_ulong]
# The clone itself goes through PyDLL: the GIL stays held across the call.
pylibc = ctypes.PyDLL(None, use_errno=True)
pylibc.syscall.restype = ctypes.c_long
pyapi = ctypes.pythonapi


class StepFailed(Exception):
    def __init__(self, step, error, call):
        super().__init__(step)
        self.step, self.error, self.call = step, error, call


def _check(rc, step, call):
    if rc < 0:
        raise StepFailed(step, ctypes.get_errno(), call)
    return rc


def _os_step(step, call, function, *args):
    try:
        return function(*args)
    except OSError as error:
        raise StepFailed(step, error.errno or 0, call) from None


def _mount(step, source, target, fstype, flags, data=None):
    b = lambda s: None if s is None else s.encode()
    _check(libc.mount(b(source), b(target), b(fstype), flags, b(data)), step,
           "mount(%s -> %s, %s, 0x%x)" % (source, target, fstype, flags))


def _prctl(step, option, arg=0, arg3=0):
    return _check(libc.prctl(option, arg, arg3, 0, 0), step, "prctl(%d, %d)" % (option, arg))


def _send(sock_fd, message, fds=()):
    with socket.socket(fileno=os.dup(sock_fd)) as sock:
        socket.send_fds(sock, [json.dumps(message).encode()], list(fds))


# ---------------------------------------------------------------- the job's steps, in order


def step_wait_for_id_maps(job):
    # EOF instead of the byte: the zygote died before it wrote the maps.
    if os.read(job["release"], 1) != b"1":
        raise StepFailed("wait for the id maps", 10, "read(release pipe)")  # ECHILD
    os.close(job["release"])


def step_die_with_zygote(job):
    _prctl("die with the zygote", PR_SET_PDEATHSIG, signal.SIGKILL)
    # A zygote that died before the prctl would not kill us: its pidfd says whether it lives.
    import select
    if select.select([job["zygote"]], [], [], 0)[0]:
        raise StepFailed("die with the zygote", 10, "poll(zygote pidfd): the zygote is gone")
    os.close(job["zygote"])


def step_make_mounts_private(job):
    _mount("make mounts private", None, "/", None, MS_REC | MS_PRIVATE)


def step_mount_tmp(job):
    request = job["request"]
    _mount("mount /tmp", "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, request["tmp"])
    _os_step("mount /tmp", "mkdir(%s)" % request["workdir"], os.mkdir, request["workdir"], 0o755)
    if request["shm"] and os.path.isdir("/dev/shm"):
        _mount("mount /dev/shm", "tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
               request["shm"])


def step_mount_proc(job):
    # The zygote's /proc has nothing mounted over it, so a user namespace of the job's may mount
    # a new one; its masks come back here (mounts.cpp's step_mount_proc).
    request = job["request"]
    _mount("mount /proc", "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for path in request["proc_masked"]:
        if not os.path.lexists(path):
            continue
        if os.path.isdir(path):
            _mount("mount /proc", "masked", path, "tmpfs",
                   MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0")
        else:
            _mount("mount /proc", "/dev/null", path, None, MS_BIND)
    for path in request["proc_readonly"]:
        if not os.path.exists(path):
            continue
        _mount("mount /proc", path, path, None, MS_BIND | MS_REC)
        _mount("mount /proc", None, path, None,
               MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def step_set_hostname(job):
    name = job["request"]["hostname"].encode()
    _check(libc.sethostname(name, len(name)), "set the hostname", "sethostname")


def step_configure_network(job):
    if not job["request"]["loopback"]:
        return
    import fcntl
    import struct
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        flags = struct.pack("16sH22x", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING)
        _os_step("configure the network", "ioctl(SIOCSIFFLAGS, lo, UP)", fcntl.ioctl,
                 sock.fileno(), SIOCSIFFLAGS, flags)


def step_new_session(job):
    _os_step("start a new session", "setsid()", os.setsid)


def step_close_fds(job):
    # Out of the way first: a received descriptor may sit where another one goes.
    import fcntl
    high = {name: fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 16) for name, fd in job["fds"].items()}
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(high["stdout"], 1)
    os.dup2(high["stderr"], 2)
    os.dup2(high["job"], JOB_FD, inheritable=False)
    if "policy" in high:
        os.dup2(high["policy"], POLICY_FD)
    else:
        os.closerange(POLICY_FD, POLICY_FD + 1)
    if "report" in high:
        os.dup2(high["report"], REPORT_FD, inheritable=False)
        os.closerange(REPORT_FD + 1, 1 << 20)
    else:
        os.closerange(REPORT_FD, 1 << 20)
    job["fds_moved"] = True


def step_set_rlimits(job):
    import resource
    for kind, soft, hard in job["request"]["rlimits"]:
        _os_step("set the script's resource limits", "setrlimit(%d, %d, %d)" % (kind, soft, hard),
                 resource.setrlimit, kind, (soft, hard))


def step_restrict_filesystem(job):
    ruleset = job["request"]["landlock"]
    if ruleset["abi"] <= 0:
        return  # optional layer: the result says it was missing
    import struct
    step = "restrict the filesystem (Landlock)"
    attr = struct.pack("Q", ruleset["handled"])
    fd = _check(libc.syscall(ctypes.c_long(SYS["landlock_create_ruleset"]), attr,
                             ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)), step,
                "landlock_create_ruleset")
    try:
        for path, access in ruleset["rules"]:
            try:
                parent = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                if not os.path.isdir(path):
                    access &= LANDLOCK_FILE_RIGHTS
                beneath = struct.pack("=Qi", access, parent)
                _check(libc.syscall(ctypes.c_long(SYS["landlock_add_rule"]), fd,
                                    LANDLOCK_RULE_PATH_BENEATH, beneath, 0), step,
                       "landlock_add_rule(%s)" % path)
            finally:
                os.close(parent)
        _check(libc.syscall(ctypes.c_long(SYS["landlock_restrict_self"]), fd, 0), step,
               "landlock_restrict_self()")
    finally:
        os.close(fd)


def step_set_no_new_privs(job):
    _prctl("set no_new_privs", PR_SET_NO_NEW_PRIVS, 1)


def step_drop_capabilities(job):
    step = "drop capabilities"
    _prctl(step, PR_SET_SECUREBITS, SECURE_BITS)
    for cap in range(job["cap_last"] + 1):
        _prctl(step, PR_CAPBSET_DROP, cap)
    _prctl(step, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(libc.syscall(ctypes.c_long(SYS["capset"]), header, data), step, "capset(all empty)")
    # Read back: a capability that survived is a failed setup, not a warning.
    _check(libc.syscall(ctypes.c_long(SYS["capget"]), header, data), step, "capget")
    if any(data) or any(libc.prctl(PR_CAPBSET_READ, cap, 0, 0, 0) > 0
                        for cap in range(job["cap_last"] + 1)):
        raise StepFailed(step, 1, "capget: capabilities left after the drop")
    if any(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) > 0
           for cap in range(job["cap_last"] + 1)):
        raise StepFailed(step, 1, "PR_CAP_AMBIENT_IS_SET: a capability is still ambient")


def step_start_init(job):
    """With processes allowed, PID 1 stays a tiny init (it reaps, and signals reach the job as
    they reach any process; a PID 1 ignores those it has no handler for) and the job continues
    as PID 2. Before seccomp, whose job filter may not allow a process. The init is not
    dumpable: the job (same uid, same namespaces) must not reach its memory or its report
    socket through /proc/1."""
    if not job["request"].get("init"):
        return
    _prctl("start the job's init", PR_SET_DUMPABLE, 0)
    pid = _os_step("start the job's init", "fork()", os.fork)
    if pid == 0:
        _prctl("start the job's init", PR_SET_DUMPABLE, 1)
        os.close(REPORT_FD)
        return
    try:
        serve_as_init(pid)
    finally:
        os._exit(125)  # the init never goes on to the job's code, whatever failed


def serve_as_init(job_pid):
    """PID 1 of a job with processes: reaps until the job ends, ends what it left, reports the
    job's wait status and the CPU of everything it reaped on the report socket. Never returns."""
    import resource
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)  # PID 1: ignored without a handler
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    # Only the report socket stays (null among the closed: it may sit below or above it).
    os.closerange(JOB_FD, REPORT_FD)
    os.closerange(REPORT_FD + 1, 1 << 20)
    status = None
    while status is None:
        try:
            pid, wait_status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == job_pid:
            status = wait_status
    try:
        os.kill(-1, signal.SIGKILL)  # nothing the job started outlives it
    except OSError:
        pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_us = int((usage.ru_utime + usage.ru_stime) * 1e6)
    try:
        _send(REPORT_FD, {"status": status if status is not None else 0, "cpu_us": cpu_us,
                          "max_rss_kib": usage.ru_maxrss})
    finally:
        os._exit(0)


def step_open_handles(job):
    # Before seccomp, which need not allow pidfd_open: how the supervisor kills the job and
    # reads what it left in /tmp/work after its namespaces are gone.
    # PID 1: the job itself, or its init (killing it ends the whole PID namespace).
    job["pidfd"] = _check(libc.syscall(ctypes.c_long(SYS["pidfd_open"]), 1, 0),
                          "hand the job to the supervisor", "pidfd_open(1)")
    job["work"] = _os_step("hand the job to the supervisor", "open(/tmp/work)", os.open,
                           job["request"]["workdir"], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def step_load_seccomp(job):
    program = bytes.fromhex(job["request"]["bpf"])
    buffer = ctypes.create_string_buffer(program, len(program))

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Fprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    job["listener"] = _check(
        libc.syscall(ctypes.c_long(SYS["seccomp"]), SECCOMP_SET_MODE_FILTER,
                     SECCOMP_FILTER_FLAG_NEW_LISTENER, ctypes.byref(fprog)),
        "load the seccomp filter", "seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER)")


# DESIGN.md's order; every step needs what the steps above it set up, seccomp last.
STEPS = (
    step_wait_for_id_maps,
    step_die_with_zygote,
    step_make_mounts_private,
    step_mount_tmp,
    step_mount_proc,
    step_set_hostname,
    step_configure_network,
    step_new_session,
    step_close_fds,
    step_set_rlimits,
    # After the mounts: a Landlock-restricted task cannot mount.
    step_restrict_filesystem,
    step_set_no_new_privs,
    step_drop_capabilities,
    step_start_init,
    step_open_handles,
    step_load_seccomp,
)


# ---------------------------------------------------------------- the job, once contained


def _receive_code():
    chunks = []
    while True:
        chunk = os.read(JOB_FD, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(JOB_FD)
    return json.loads(b"".join(chunks))


def _stdin(data):
    if not data:
        return
    read, write = os.pipe()
    if len(data) <= 65536:  # fits the pipe: no file left in /tmp
        os.write(write, data)
    else:
        path = "/tmp/.pysandbox-stdin"
        with open(path, "wb") as file:
            file.write(data)
        os.close(read)
        read = os.open(path, os.O_RDONLY)
        os.unlink(path)
    os.close(write)
    os.dup2(read, 0)
    os.close(read)
    sys.stdin = open(0, "r", closefd=False)


def _without_own_frames(tb):
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return tb


def _exit_status(error):
    code = error.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:
        pass
    return 1


def _write_files(files):
    """The job's "inputs", into /tmp/work before its code runs (as the cell driver does)."""
    for entry in files:
        with open(entry["name"], "xb") as out:
            out.write(bytes.fromhex(entry["hex"]))


def _reseed_preloaded():
    # Every job is a copy of the zygote: `random` is reseeded by CPython's fork hooks, the
    # preloaded libraries' generators are not (the str hash secret cannot be: it is fixed at
    # start-up, docs/forkserver-status.md).
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        try:
            numpy.random.seed()
        except Exception:
            pass


def run_job(job, environment):
    """Runs the job's code as `python3 -c` would, in this process (PID 1 of the job), and exits
    with its status."""
    message = _receive_code()
    os.environ.clear()
    for entry in environment:
        name, _, value = entry.partition("=")
        os.environ[name] = value
    os.chdir(job["request"]["workdir"])
    _reseed_preloaded()
    _write_files(message.get("files", ()))
    _stdin(message.get("stdin", "").encode("utf-8", "surrogateescape"))
    if "PYSANDBOX_POLICY" in os.environ:
        # The [policy] hook, in the job only: sitecustomize installs it when its variable is set.
        import importlib
        import sitecustomize
        importlib.reload(sitecustomize)
    import types
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    sys.argv = list(message.get("argv") or ["-c"])
    sys.path[0] = ""
    status = 0
    try:
        code = compile(message["code"], message.get("filename") or "<string>", "exec")
        exec(code, main.__dict__)
    except SystemExit as error:
        status = _exit_status(error)
    except BaseException as error:
        error.__traceback__ = _without_own_frames(error.__traceback__)
        try:
            sys.excepthook(type(error), error, error.__traceback__)
        except BaseException:
            pass
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(status)


def job_main(job):
    """The cloned child. Never returns."""
    try:
        for step in STEPS:
            step(job)
        _send(JOB_FD, {"hello": True}, [job["pidfd"], job["work"], job["listener"]])
        for name in ("pidfd", "work", "listener"):
            os.close(job[name])  # the job must never hold its own listener
    except StepFailed as failure:
        _report_failure(job, failure.step, failure.error, failure.call)
    except BaseException as error:  # a bug here is a failed setup, never a job without layers
        _report_failure(job, "set up the job", 22, "%s: %s" % (type(error).__name__, error))
    try:
        run_job(job, job["request"]["env"])
    finally:
        os._exit(1)


def _report_failure(job, step, error, call):
    try:
        fd = JOB_FD if job.get("fds_moved") else job["fds"]["job"]
        _send(fd, {"step": step, "errno": error, "call": call})
    finally:
        os._exit(125)


# ---------------------------------------------------------------- the zygote


class Zygote:
    def __init__(self, channel_fd):
        self.channel = socket.socket(fileno=channel_fd)
        os.set_inheritable(channel_fd, False)
        self.uid, self.gid = os.getuid(), os.getgid()
        with open("/proc/sys/kernel/cap_last_cap") as file:
            self.cap_last = int(file.read())
        self.me = os.pidfd_open(os.getpid())
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.channel, selectors.EVENT_READ, None)

    def serve(self):
        while True:
            for key, _ in self.selector.select():
                if key.data is None:
                    if not self.receive():
                        return
                else:
                    self.reap(key)

    def receive(self):
        message, fds, _, _ = socket.recv_fds(self.channel, MAX_REQUEST, 5)
        if not message:
            return False
        try:
            request = json.loads(message)
            if "kill" in request:  # a job whose setup hangs: only the zygote knows its pid
                self.kill(request["kill"])
                return True
            try:
                self.start(request, fds)
            except Exception as error:  # one job's failure, not the zygote's
                self.tell({"job": request.get("job"), "error": "%s: %s" % (
                    type(error).__name__, error)})
        finally:
            for fd in fds:
                os.close(fd)
        return True

    def start(self, request, fds):
        names = ["stdout", "stderr", "job"] + (["policy"] if request.get("policy") else []) + \
            (["report"] if request.get("init") else [])
        if len(fds) != len(names):
            self.tell({"job": request.get("job"), "error": "expected %d descriptors" % len(names)})
            return
        threads = len(os.listdir("/proc/self/task"))
        if threads != 1:  # a clone copies only this thread: refuse rather than break the job
            self.tell({"job": request["job"], "error": "the zygote runs %d threads" % threads})
            return
        job = {"request": request, "fds": dict(zip(names, fds)), "cap_last": self.cap_last,
               "zygote": self.me}
        release_read, release_write = os.pipe()
        job["release"] = release_read
        pid = self.clone(job)
        os.close(release_read)
        if pid < 0:
            os.close(release_write)
            self.tell({"job": request["job"], "error": "clone(NEWUSER|NEWNS|NEWPID|NEWIPC|"
                       "NEWNET|NEWUTS): %s" % os.strerror(-pid)})
            return
        try:
            for name, text in (("setgroups", "deny"), ("uid_map", "%d %d 1" % (self.uid, self.uid)),
                               ("gid_map", "%d %d 1" % (self.gid, self.gid))):
                with open("/proc/%d/%s" % (pid, name), "w") as file:
                    file.write(text)
            os.write(release_write, b"1")
        except OSError as error:
            self.tell({"job": request["job"], "error": "id maps: %s" % error})
        os.close(release_write)
        pidfd = os.pidfd_open(pid)
        self.selector.register(pidfd, selectors.EVENT_READ, (pid, request["job"]))
        self.tell({"job": request["job"], "pid": pid})

    def clone(self, job):
        """clone(2) straight into the job's namespaces, with CPython's fork hooks around it (the
        GIL held: the zygote is single-threaded, checked above). Returns the pid or -errno."""
        pyapi.PyOS_BeforeFork()
        pid = pylibc.syscall(ctypes.c_long(SYS["clone"]),
                             ctypes.c_long(JOB_NAMESPACES | signal.SIGCHLD), ctypes.c_long(0),
                             ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0))
        if pid == 0:
            pyapi.PyOS_AfterFork_Child()
            try:
                keep = set(job["fds"].values()) | {job["release"], job["zygote"]}
                os.closerange(3, min(keep))
                for low, high in zip(sorted(keep), sorted(keep)[1:] + [1 << 20]):
                    os.closerange(low + 1, high)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                job_main(job)
            finally:
                os._exit(125)
        error = ctypes.get_errno()
        pyapi.PyOS_AfterFork_Parent()
        return pid if pid > 0 else -error

    def kill(self, job):
        # By pid: a child not yet reaped (reap() runs from this loop) keeps its pid.
        for key in list(self.selector.get_map().values()):
            if key.data is not None and key.data[1] == job:
                try:
                    os.kill(key.data[0], signal.SIGKILL)
                except OSError:
                    pass

    def reap(self, key):
        pid, job = key.data
        self.selector.unregister(key.fileobj)
        os.close(key.fileobj)
        _, status, usage = os.wait4(pid, 0)
        cpu_us = int((usage.ru_utime + usage.ru_stime) * 1e6)
        self.tell({"job": job, "status": status, "cpu_us": cpu_us, "max_rss_kib": usage.ru_maxrss})

    def tell(self, message):
        self.channel.send(json.dumps(message).encode())


def main():
    channel_fd = int(sys.argv[1])
    failed = {}
    for name in sys.argv[2:]:
        try:
            __import__(name)
        except BaseException as error:
            failed[name] = "%s: %s" % (type(error).__name__, error)
    import gc
    gc.freeze()  # fewer copy-on-write faults in the jobs
    zygote = Zygote(channel_fd)
    zygote.tell({"ready": True, "failed": failed})
    zygote.serve()


if __name__ == "__main__":
    main()
