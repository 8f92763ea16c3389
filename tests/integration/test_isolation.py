"""What a sandboxed script can reach, judged from the host.

Most probes run in the background (harness.Running) so the test can look at the
live sandbox from the host: ``/proc/PID/status``, ``/proc/PID/fd``, the namespace
links, and the sandbox's own filesystem through ``/proc/PID/root``. What the probe
reports about itself is used as secondary evidence only.

/dev policy checked here: exactly null, zero, full, random and urandom as the
standard character devices, plus optionally the conventional symlinks fd, stdin,
stdout and stderr into /proc/self/fd. Nothing else (no tty, pts, ptmx, shm).
"""

import json
import os
import select
import socket
import stat
import subprocess
import unittest
from pathlib import Path

from harness import (
    SANDBOX_UID,
    WAIT_FOR_HOST,
    AS_NOBODY,
    NOBODY_UID,
    SandboxTestCase,
    expected_host_uid,
    landlock_abi,
    new_secret,
    profile,
    parse_report,
    proc_status,
    temp_dir,
    write_file,
)

ZERO_CAPS = "0000000000000000"


def inside(pid: int, path: str) -> str:
    """The host path of ``path`` as seen by sandboxed process ``pid``."""
    return f"/proc/{pid}/root{path}"


def read_id_map(pid: int, kind: str) -> list[tuple[int, int, int]]:
    with open(f"/proc/{pid}/{kind}_map") as f:
        return [tuple(map(int, line.split())) for line in f if line.strip()]


class FilesystemWriteTest(SandboxTestCase):
    PROBE = """
        import os, sys
        marker, *targets = sys.argv[1:]
        name = "pwned-" + marker
        results = {}
        for target in targets:
            path = os.path.join(target, name)
            try:
                with open(path, "x") as f:
                    f.write(marker)
                results[target] = "ok"
            except OSError as exc:
                results[target] = type(exc).__name__
            try:
                os.mkdir(path + ".d")
                results[target + " (mkdir)"] = "ok"
            except OSError as exc:
                results[target + " (mkdir)"] = type(exc).__name__
        with open("/tmp/work/x", "w") as f:
            f.write("written " + marker)
        with open("/tmp/work/x") as f:
            results["/tmp/work/x"] = f.read()
        with open(os.path.join("/tmp", name), "w") as f:  # fine inside, must stay inside
            f.write(marker)
        results["cwd"] = os.getcwd()
        report(results)
        print("ready", flush=True)
        sys.stdin.read()
    """

    SYSTEM_DIRS = ["/", "/usr", "/usr/lib", "/usr/bin", "/etc", "/root", "/var/tmp", "/dev"]

    def test_only_tmp_is_writable(self):
        script_dir = temp_dir(0o777)
        host_tmp_dir = temp_dir(0o777)  # exists on the host, so must not inside
        name = f"pwned-{self.marker}"
        targets = [*self.SYSTEM_DIRS, str(script_dir), str(host_tmp_dir)]

        with self.running(self.PROBE, *targets, directory=script_dir) as live:
            report = parse_report(live.early_stdout)
            for target in self.SYSTEM_DIRS:
                with self.subTest(target=target):
                    self.assertNotEqual(report[target], "ok", f"created a file in {target}")
                    self.assertNotEqual(report[target + " (mkdir)"], "ok")
                    self.assertFalse(os.path.lexists(inside(live.pid, f"{target}/{name}")))
                    self.assertFalse(os.path.lexists(inside(live.pid, f"{target}/{name}.d")))
            # /tmp/work works, as seen from the host through the sandbox's root.
            self.assertEqual(report["/tmp/work/x"], f"written {self.marker}")
            self.assertEqual(Path(inside(live.pid, "/tmp/work/x")).read_text(),
                             f"written {self.marker}")
            self.assertEqual(report["cwd"], "/tmp/work")
        self.assertExit(live.result, 0)

        for target in [*self.SYSTEM_DIRS, "/tmp"]:
            with self.subTest(host=target):
                self.assertFalse(os.path.lexists(f"{target}/{name}"), f"{target}/{name} on host")
                self.assertFalse(os.path.lexists(f"{target}/{name}.d"))
        self.assertEqual(sorted(os.listdir(script_dir)), ["probe.py"],
                         "the script's host directory was modified")
        self.assertEqual(os.listdir(host_tmp_dir), [], "the host's /tmp was modified")
        host_x = Path("/tmp/work/x")
        if host_x.exists():
            self.assertNotIn(self.marker, host_x.read_text(errors="replace"))


class SecretsTest(SandboxTestCase):
    PROBE = """
        import os, sys
        marker, *paths = sys.argv[1:]
        here = os.path.dirname(os.path.abspath(__file__))
        paths += [os.path.join(here, "secret.txt"), "secret.txt", "/tmp/secret.txt"]
        found = {}
        def grab(path):
            try:
                with open(path, "rb") as f:
                    found[path] = f.read(65536).decode("latin-1")
            except OSError as exc:
                found.setdefault(path, type(exc).__name__)
        for path in paths:
            grab(path)
        listings = {}
        for directory in {"/", "/root", "/tmp", "/tmp/work", "/var/tmp", here,
                          *(os.path.dirname(p) for p in paths)}:
            try:
                listings[directory] = sorted(os.listdir(directory))
            except OSError as exc:
                listings[directory] = type(exc).__name__
        for top in ["/tmp", "/root", "/var/tmp", here]:
            for root, dirs, files in os.walk(top):
                for name in files:
                    grab(os.path.join(root, name))
        report({"found": found, "listings": listings})
        print("ready", flush=True)
        sys.stdin.read()
    """

    # Host system directories bound into the sandbox; the canaries are never there.
    SYSTEM_BINDS = {"proc", "sys", "dev", "usr", "lib", "lib32", "lib64", "libx32", "bin", "sbin"}

    def plant(self, path: Path, secret: str) -> Path:
        write_file(path, secret + "\n", mode=0o644)
        self.addCleanup(path.unlink, missing_ok=True)
        return path

    def test_host_files_are_not_visible(self):
        secrets = {key: new_secret() for key in ("root", "var_tmp", "script_dir", "host_tmp")}
        script_dir = temp_dir()
        canaries = [
            self.plant(Path(f"/root/pysandbox-canary-{self.marker}"), secrets["root"]),
            self.plant(Path(f"/var/tmp/pysandbox-canary-{self.marker}"), secrets["var_tmp"]),
            self.plant(script_dir / "secret.txt", secrets["script_dir"]),
            self.plant(temp_dir() / "secret.txt", secrets["host_tmp"]),
        ]
        paths = [str(p) for p in canaries] + [f"/proc/1/root{canaries[0]}"]

        with self.running(self.PROBE, *paths, directory=script_dir) as live:
            parse_report(live.early_stdout)  # the probe really ran
            leaked = self.find_in_sandbox_fs(live.pid, secrets.values())
        self.assertExit(live.result, 0)
        self.assertEqual(leaked, [], "secrets are present in the sandbox's filesystem")
        for key, secret in secrets.items():
            with self.subTest(canary=key):
                self.assertNotIn(secret.encode(), live.result.output)

    def find_in_sandbox_fs(self, pid, secrets):
        """Host-side scan of the sandbox's filesystem (minus system binds) for secrets."""
        root = inside(pid, "")
        hits = []
        for top, dirs, files in os.walk(root + "/"):
            if top == root + "/":
                dirs[:] = [d for d in dirs if d not in self.SYSTEM_BINDS]
            for name in files:
                path = os.path.join(top, name)
                try:
                    if not stat.S_ISREG(os.lstat(path).st_mode):
                        continue
                    with open(path, "rb") as f:
                        data = f.read(4 * 1024 * 1024)
                except OSError:
                    continue
                hits += [(path, s) for s in secrets if s.encode() in data]
        return hits


class NetworkTest(SandboxTestCase):
    PROBE = """
        import json, socket, sys
        results = {}
        for label, family, address in json.loads(sys.argv[2]):
            if family == "unix":
                family, address = "AF_UNIX", "\\0" + address
            try:  # a policy may already refuse socket() itself
                with socket.socket(getattr(socket, family)) as sock:
                    sock.settimeout(1)
                    sock.connect(tuple(address) if isinstance(address, list) else address)
                    sock.sendall(b"hello from the sandbox")
                    results[label] = "CONNECTED"
            except OSError as exc:
                results[label] = f"{type(exc).__name__}: {exc}"
        report(results)
    """

    def listen(self, family, address):
        sock = socket.socket(family, socket.SOCK_STREAM)
        self.addCleanup(sock.close)
        sock.bind(address)
        sock.listen(8)
        sock.setblocking(False)
        return sock

    def host_addresses(self):
        """Non-loopback IPv4 address of the host, if it has a route anywhere."""
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            probe.connect(("10.255.255.255", 9))  # no packet is sent for UDP connect
            return [probe.getsockname()[0]]
        except OSError:
            return []
        finally:
            probe.close()

    def test_host_listeners_are_unreachable(self):
        listeners = {}
        targets = []
        tcp = self.listen(socket.AF_INET, ("127.0.0.1", 0))
        listeners["tcp 127.0.0.1"] = tcp
        targets.append(["tcp 127.0.0.1", "AF_INET", ["127.0.0.1", tcp.getsockname()[1]]])
        for addr in self.host_addresses():
            sock = self.listen(socket.AF_INET, (addr, 0))
            listeners[f"tcp {addr}"] = sock
            targets.append([f"tcp {addr}", "AF_INET", [addr, sock.getsockname()[1]]])
        if socket.has_ipv6:
            try:
                sock6 = self.listen(socket.AF_INET6, ("::1", 0))
            except OSError:
                pass  # no IPv6 loopback on this host
            else:
                listeners["tcp ::1"] = sock6
                targets.append(["tcp ::1", "AF_INET6", ["::1", sock6.getsockname()[1]]])
        abstract = f"pysandbox-it-{self.marker}"
        listeners["abstract unix"] = self.listen(socket.AF_UNIX, "\0" + abstract)
        targets.append(["abstract unix", "unix", abstract])

        result = self.run_script(self.PROBE, json.dumps(targets), options=["--json"])
        self.assertExit(result, 0)
        obj = result.json()
        report = parse_report(obj["stdout"].encode())
        for label, sock in listeners.items():
            with self.subTest(listener=label):
                readable, _, _ = select.select([sock], [], [], 0.2)
                self.assertFalse(readable, f"host listener {label} got a connection")
                self.assertNotEqual(report[label], "CONNECTED")
        # Each attempt was refused by the sandbox, as its supervisor recorded: seccomp denied
        # every inet socket() (--net none), the [policy] hook the abstract unix connect().
        inet = sum(1 for _, family, _ in targets if family != "unix")
        self.assertEqual(sorted(obj["violations"], key=lambda v: v["kind"]), [
            {"kind": "call", "what": "socket.connect", "count": 1, "action": "denied"},
            {"kind": "syscall", "what": "socket", "count": inet, "action": "denied"}])


def unix_socket_type(inode: str) -> str | None:
    """The type column of the host's /proc/net/unix for the socket with this inode (0005:
    SEQPACKET). pysandbox makes the channel in the host's network namespace."""
    with open("/proc/self/net/unix") as table:
        for line in table.readlines()[1:]:
            columns = line.split()
            if len(columns) >= 7 and columns[6] == inode:
                return columns[4]
    return None


class LiveProcessTest(SandboxTestCase):
    """Host-side inspection of the running sandboxed interpreter."""

    def test_no_capabilities_no_new_privs_unprivileged_host_uid(self):
        with self.running(WAIT_FOR_HOST) as live:
            status = proc_status(live.pid)
        for field in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            self.assertEqual(status[field], ZERO_CAPS, field)
        self.assertEqual(status["NoNewPrivs"], "1")
        uid = str(expected_host_uid())
        self.assertEqual(status["Uid"].split(), [uid] * 4, "real/effective/saved/fs uid")
        gids = status["Gid"].split()
        self.assertNotIn("0", gids, "runs with the host's root group")
        self.assertEqual(len(set(gids)), 1, f"mixed gids {gids}")
        self.assertNotIn("0", status["Groups"].split(), "keeps supplementary group root")

    def test_seccomp_filter_is_active(self):
        with self.running(WAIT_FOR_HOST) as live:
            status = proc_status(live.pid)
        self.assertEqual(status["Seccomp"], "2", "no seccomp filter on the script")

    def test_user_namespace_maps_one_uid(self):
        with self.running(WAIT_FOR_HOST) as live:
            uid_map = read_id_map(live.pid, "uid")
            gid_map = read_id_map(live.pid, "gid")
            setgroups = Path(f"/proc/{live.pid}/setgroups").read_text().strip()
        self.assertEqual(uid_map, [(SANDBOX_UID, expected_host_uid(), 1)])
        self.assertEqual(len(gid_map), 1, gid_map)
        self.assertEqual(gid_map[0][2], 1, "maps more than one gid")
        self.assertNotEqual(gid_map[0][1], 0, "maps the host's root group")
        self.assertEqual(setgroups, "deny")

    def test_sandbox_init_is_unprivileged_too(self):
        with self.running(WAIT_FOR_HOST) as live:
            init = int(proc_status(live.pid)["PPid"])
            status = proc_status(init)
        self.assertEqual(status["NSpid"].split()[-1], "1", "python's parent is not the sandbox init")
        self.assertEqual(status["CapEff"], ZERO_CAPS)
        self.assertEqual(status["CapBnd"], ZERO_CAPS)
        self.assertEqual(status["NoNewPrivs"], "1")
        self.assertEqual(status["Uid"].split(), [str(expected_host_uid())] * 4)

    def test_every_namespace_is_new(self):
        with self.running(WAIT_FOR_HOST) as live:
            links = {ns: os.readlink(f"/proc/{live.pid}/ns/{ns}")
                     for ns in ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup")}
        for ns, link in links.items():
            with self.subTest(namespace=ns):
                self.assertNotEqual(link, os.readlink(f"/proc/self/ns/{ns}"))

    def test_leaked_fds_are_closed(self):
        secret = new_secret()
        directory = temp_dir()
        leak = write_file(directory / "leak.txt", secret + "\n")
        low = os.open(leak, os.O_RDONLY)
        self.addCleanup(os.close, low)
        high = os.dup2(low, 200, inheritable=True)
        self.addCleanup(os.close, high)
        probe = """
            import os, sys
            found = {}
            for fd in range(3, 1024):
                try:
                    found[fd] = os.pread(fd, 4096, 0).decode("latin-1")
                except OSError as exc:
                    if exc.errno != 9:  # EBADF: not open
                        found[fd] = type(exc).__name__
            report(found)
            print("ready", flush=True)
            sys.stdin.read()
        """
        with self.running(probe, pass_fds=(low, high)) as live:
            fds = sorted(os.listdir(f"/proc/{live.pid}/fd"), key=int)
            channel = os.readlink(f"/proc/{live.pid}/fd/4") if "4" in fds else ""
            kind = unix_socket_type(channel[len("socket:["):-1])
            with open(f"/proc/{live.pid}/fdinfo/4") if channel else open(os.devnull) as info:
                flags = next((int(line.split()[1], 8) for line in info
                              if line.startswith("flags:")), None)
            report = parse_report(live.early_stdout)
        # Besides stdio only the [policy] audit hook's channel is open: fd 4, a unix
        # SOCK_SEQPACKET socket (type 0005 in /proc/net/unix) whose other end pysandbox drains.
        # Nothing of the caller's.
        self.assertEqual(fds, ["0", "1", "2", "4"])
        self.assertTrue(channel.startswith("socket:["), channel)
        self.assertEqual(kind, "0005", "not a SOCK_SEQPACKET socket")
        self.assertIsNotNone(flags)
        self.assertEqual(report, {"4": "OSError"}, "fd 4 has nothing to read (ESPIPE)")
        self.assertNotIn(secret.encode(), live.result.output)

    def test_pid_namespace_hides_host_processes(self):
        # A host process with the same uid as the script: only the PID namespace protects it.
        same_uid = AS_NOBODY if expected_host_uid() == NOBODY_UID != os.geteuid() else []
        sleeper = subprocess.Popen([*same_uid, "sleep", "60"])
        self.addCleanup(sleeper.wait)
        self.addCleanup(sleeper.kill)
        probe = """
            import os, signal, sys
            victim = int(sys.argv[2])
            try:
                os.kill(victim, signal.SIGKILL)
                kill = "sent"
            except OSError as exc:
                kill = type(exc).__name__
            report({"pid": os.getpid(), "ppid": os.getppid(), "kill": kill,
                    "proc": sorted(int(n) for n in os.listdir("/proc") if n.isdigit())})
            print("ready", flush=True)
            sys.stdin.read()
        """
        with self.running(probe, str(sleeper.pid)) as live:
            report = parse_report(live.early_stdout)
            nspid = proc_status(live.pid)["NSpid"].split()
        self.assertExit(live.result, 0)
        self.assertIsNone(sleeper.poll(), "the script killed a host process")
        self.assertGreaterEqual(len(nspid), 2, "not in a child PID namespace")
        self.assertLessEqual(int(nspid[-1]), 3)
        self.assertEqual(report["pid"], int(nspid[-1]))
        self.assertLessEqual(report["pid"], 3)
        visible = set(report["proc"])
        self.assertNotIn(os.getpid(), visible)
        self.assertNotIn(live.proc.pid, visible)
        self.assertNotIn(sleeper.pid, visible)
        self.assertLessEqual(max(visible), 10, f"/proc lists host-like pids {sorted(visible)}")

    def test_hostname_is_sandbox(self):
        result = self.run_script("""
            import os, socket
            report({"hostname": socket.gethostname(), "nodename": os.uname().nodename})
        """)
        self.assertExit(result, 0)
        self.assertEqual(parse_report(result.stdout),
                         {"hostname": "sandbox", "nodename": "sandbox"})
        self.assertNotEqual(socket.gethostname(), "sandbox")


class DeviceIoctlTest(SandboxTestCase):
    """Landlock (ABI 5) refuses ioctls on the devices the sandbox opens: no rule grants
    LANDLOCK_ACCESS_FS_IOCTL_DEV. TCGETS passes the seccomp filter (isatty() needs it), so the
    driver would answer ENOTTY; RNDGETENTCNT on /dev/urandom, which any user may ask, is shown
    with the filter relaxed (a profile that allows ioctl outright), so that Landlock is what
    answers."""

    PROBE = """
        import errno, fcntl, os, termios
        RNDGETENTCNT = 0x80045200
        out = {}
        for name in ("null", "zero", "urandom"):
            fd = os.open("/dev/" + name, os.O_RDONLY)
            try:
                termios.tcgetattr(fd)
                out[name + " TCGETS"] = "ok"
            except termios.error as e:
                out[name + " TCGETS"] = errno.errorcode[e.args[0]]
            try:
                fcntl.ioctl(fd, RNDGETENTCNT, bytes(4))
                out[name + " RNDGETENTCNT"] = "ok"
            except OSError as e:
                out[name + " RNDGETENTCNT"] = errno.errorcode[e.errno]
        report(out)
    """

    def setUp(self):
        super().setUp()
        if landlock_abi() < 5:
            self.fail(f"this kernel's Landlock ABI is {landlock_abi()}: device ioctls need 5")

    def test_device_ioctls_are_refused(self):
        r = self.run_script(self.PROBE)
        self.assertEqual(r.returncode, 0, r.describe())
        out = parse_report(r.stdout)
        for name in ("null", "zero", "urandom"):
            with self.subTest(device=name):
                self.assertEqual(out[name + " TCGETS"], "EACCES", out)
                # The filter answers first: ENOTTY for every ioctl outside its list.
                self.assertEqual(out[name + " RNDGETENTCNT"], "ENOTTY", out)

    def test_device_ioctls_are_refused_with_the_filter_relaxed(self):
        relaxed = profile("""
            extends = "default"

            [seccomp]
            allow = ["ioctl"]
        """)
        r = self.run_script(self.PROBE, options=["-p", str(relaxed)])
        self.assertEqual(r.returncode, 0, r.describe())
        out = parse_report(r.stdout)
        for name in ("null", "zero", "urandom"):
            with self.subTest(device=name):
                self.assertEqual(out[name + " TCGETS"], "EACCES", out)
                self.assertEqual(out[name + " RNDGETENTCNT"], "EACCES", out)


class EnvironmentTest(SandboxTestCase):
    PROBE = """
        import os, sys
        def raw(path):
            try:
                with open(path, "rb") as f:
                    return f.read().decode("latin-1")
            except OSError as exc:
                return type(exc).__name__
        report({"environ": dict(os.environ), "path": sys.path,
                "self": raw("/proc/self/environ"), "init": raw("/proc/1/environ")})
        print("ready", flush=True)
        sys.stdin.read()
    """

    DANGEROUS = {
        "LD_PRELOAD": "/nonexistent.so",
        "LD_LIBRARY_PATH": "/nonexistent",
        "PYTHONPATH": "/x",
        "PYTHONSTARTUP": "/x/startup.py",
        "PYTHONHOME": "/x",
    }

    def test_caller_environment_does_not_leak(self):
        secret = new_secret()
        env = dict(os.environ, AWS_SECRET_ACCESS_KEY=secret, **self.DANGEROUS)
        with self.running(self.PROBE, env=env) as live:
            host_view = Path(f"/proc/{live.pid}/environ").read_bytes()
        self.assertExit(live.result, 0)
        report = parse_report(live.result.stdout)
        environ = report["environ"]
        # PYTHONPATH is the sandbox's own (the figure backend): never the caller's.
        sandbox_own = {"PYTHONPATH": "/sandbox/.pysandbox"}
        for name in ["AWS_SECRET_ACCESS_KEY", *self.DANGEROUS]:
            with self.subTest(variable=name):
                self.assertEqual(environ.get(name), sandbox_own.get(name))
                if name not in sandbox_own:
                    self.assertNotIn(name.encode() + b"=", host_view)
        self.assertNotIn("/x", report["path"])
        self.assertNotIn(secret.encode(), host_view)
        self.assertNotIn(secret.encode(), live.result.stdout + live.result.stderr,
                         "the secret is readable inside (environ of self or init)")

    def test_env_flag_sets_a_variable(self):
        result = self.run_script('import os; report(os.environ.get("FOO"))',
                                 options=["--env", "FOO=bar"])
        self.assertExit(result, 0)
        self.assertEqual(parse_report(result.stdout), "bar")

    def test_env_name_without_value_passes_the_callers_value(self):
        value = new_secret()
        env = dict(os.environ, PYSANDBOX_IT_PASSED=value)
        result = self.run_script(
            'import os; report(os.environ.get("PYSANDBOX_IT_PASSED"))',
            options=["--env", "PYSANDBOX_IT_PASSED"], env=env)
        self.assertExit(result, 0)
        self.assertEqual(parse_report(result.stdout), value)


class FilesystemViewTest(SandboxTestCase):
    PROBE = """
        import os, pwd, sys
        try:
            me = pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            me = None
        dev = {}
        for name in ["null", "zero", "full", "random", "urandom"]:
            path = "/dev/" + name
            try:
                with open(path, "r+b", buffering=0) as f:
                    dev[name] = len(f.read(16))
                    try:
                        f.write(b"x")
                        dev[name + " write"] = "ok"
                    except OSError as exc:
                        dev[name + " write"] = exc.errno
            except OSError as exc:
                dev[name] = type(exc).__name__
        report({"sys": os.path.lexists("/sys"), "uid": os.getuid(), "user": me,
                "dev": sorted(os.listdir("/dev")), "devio": dev})
        print("ready", flush=True)
        sys.stdin.read()
    """

    DEVICES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9)}
    OPTIONAL_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
                      "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}

    def setUp(self):
        super().setUp()
        self.live = self.running(self.PROBE)
        self.live.__enter__()
        self.addCleanup(self.live.__exit__, None, None, None)
        self.report = parse_report(self.live.early_stdout)

    def test_no_sys(self):
        self.assertFalse(os.path.lexists(inside(self.live.pid, "/sys")))
        self.assertFalse(self.report["sys"])
        with open(f"/proc/{self.live.pid}/mountinfo") as f:
            mounts = [line.split() for line in f]
        mount_points = [m[4] for m in mounts]
        fs_types = [m[m.index("-") + 1] for m in mounts]
        self.assertNotIn("sysfs", fs_types)
        self.assertFalse([p for p in mount_points if p == "/sys" or p.startswith("/sys/")])

    def test_dev_is_minimal(self):
        dev = inside(self.live.pid, "/dev")
        entries = set(os.listdir(dev))
        self.assertEqual(sorted(entries), self.report["dev"])
        extra = entries - set(self.DEVICES) - set(self.OPTIONAL_LINKS)
        self.assertEqual(extra, set(), "unexpected entries in /dev")
        for name, (major, minor) in self.DEVICES.items():
            with self.subTest(device=name):
                st = os.stat(f"{dev}/{name}")
                self.assertTrue(stat.S_ISCHR(st.st_mode), f"/dev/{name} is not a char device")
                self.assertEqual((os.major(st.st_rdev), os.minor(st.st_rdev)), (major, minor))
        for name in entries & set(self.OPTIONAL_LINKS):
            with self.subTest(link=name):
                self.assertTrue(os.path.islink(f"{dev}/{name}"), f"/dev/{name} is not a symlink")
                self.assertEqual(os.readlink(f"{dev}/{name}"), self.OPTIONAL_LINKS[name])

    def test_devices_work(self):
        io = self.report["devio"]
        self.assertEqual(io["null"], 0)
        self.assertEqual(io["null write"], "ok")
        self.assertEqual(io["zero"], 16)
        self.assertEqual(io["urandom"], 16)
        self.assertEqual(io["full write"], 28)  # ENOSPC

    def test_etc_passwd_is_synthetic(self):
        host = Path("/etc/passwd").read_text().splitlines()
        sandbox = Path(inside(self.live.pid, "/etc/passwd")).read_text().splitlines()
        self.assertTrue(sandbox != host, "/etc/passwd inside is the host's")
        shared = {line.split(":")[0] for line in set(host) & set(sandbox)}
        self.assertLessEqual(shared, {"nobody"}, "host accounts copied into the sandbox")
        self.assertNotIn(host[0] if host[0].startswith("root:") else "root:x:0:0:", sandbox)
        self.assertFalse(os.path.lexists(inside(self.live.pid, "/etc/shadow")))

    def test_own_uid_resolves(self):
        self.assertEqual(self.report["uid"], SANDBOX_UID)
        self.assertIsNotNone(self.report["user"], "getpwuid(getuid()) fails inside")


if __name__ == "__main__":
    unittest.main()
