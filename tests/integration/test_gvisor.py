"""sandbox.kernel = "gvisor" (--kernel gvisor, the paranoid profile): the script's system calls are
answered by gVisor's runsc, under the same plan as on the host kernel.

Judged from the host: which processes exist in the sandbox's PID namespace and what they
execute, their seccomp filters (/proc/PID/status), exit statuses, the bytes on the pipes, files
on the host's disk. What the script says about its kernel is secondary evidence.
"""

import json
import os
import signal
import subprocess
import time
import unittest

from harness import (PYSANDBOX, SandboxTestCase, command_prefix, expected_host_uid, jobs_file,
                     leftovers, parse_report, probe_script, proc_status, profile, run, temp_dir,
                     write_file)

GVISOR = ["--kernel", "gvisor"]
# runsc starts in about half a second here; a loaded machine takes longer.
TIMEOUT = ["--timeout", "20s"]


def sandbox_processes(init_pid: int) -> list[int]:
    """Host pids of the processes in init's PID namespace (init included)."""
    namespace = os.readlink(f"/proc/{init_pid}/ns/pid")
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/ns/pid") == namespace:
                pids.append(int(entry))
        except OSError:
            pass
    return pids


def parent(pid: int) -> int:
    """``pid``'s parent, or 0 once it is gone (runsc's short-lived helpers end while listed)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return int(next(line for line in status if line.startswith("PPid:")).split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return 0


def runsc_sandbox(init_pid: int) -> int:
    """gVisor's sandbox process (the sentry) in init's PID namespace."""
    found = []
    for pid in sandbox_processes(init_pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if cmdline.read().startswith(b"runsc-sandbox\0"):
                    found.append(pid)
        except (FileNotFoundError, ProcessLookupError):
            pass  # gone since it was listed
    assert len(found) == 1, found
    return found[0]


def executable(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


class GvisorTest(SandboxTestCase):
    def test_the_script_is_served_by_gvisor_not_the_host_kernel(self):
        path = probe_script("""
            import os, sys
            report({"release": os.uname().release})
            print("ready", flush=True)
            sys.stdin.read()
            """)
        proc = subprocess.Popen(
            [*command_prefix(), PYSANDBOX, "run", *GVISOR, *TIMEOUT, str(path), "--",
             self.marker], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(proc.kill)
        ready = b""
        while b"ready\n" not in ready:
            chunk = proc.stdout.read1(4096)
            if not chunk:
                self.fail(f"the probe ended early: {ready!r} {proc.stderr.read()!r}")
            ready += chunk
        own = os.readlink("/proc/self/ns/pid")
        init = [pid for pid in leftovers(self.marker) if os.readlink(f"/proc/{pid}/ns/pid") != own]
        self.assertEqual(len(init), 1, f"init, which carries the marker, is not alone: {init} of "
                         f"{leftovers(self.marker)}")
        pids = sandbox_processes(init[0])
        programs = {pid: executable(pid) for pid in pids}
        # No host process in the sandbox runs the interpreter: the script's code runs in gVisor's
        # stub processes, whose every call the sentry serves.
        self.assertFalse([p for p in programs.values() if "python" in os.path.basename(p)],
                         programs)
        self.assertTrue([p for p in programs.values() if p.endswith("/runsc")], programs)
        # runsc starts once: init made the user namespace where runsc is root (inside/init.cpp),
        # so runsc does not start itself again as /proc/self/exe to make one (a cold run's
        # 40-100 ms, bench/README.md).
        names = {}
        for pid in pids:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                names[pid] = cmdline.read().split(b"\0")[0]
        self.assertNotIn(b"/proc/self/exe", names.values(), names)
        # Every process but init holds pysandbox's filter around runsc, and runsc's own processes
        # stack theirs on it.
        filters = {pid: int(proc_status(pid).get("Seccomp_filters", "0"))
                   for pid in pids if pid != init[0] and programs[pid]}
        self.assertTrue(filters and min(filters.values()) >= 1, filters)
        self.assertGreaterEqual(max(filters.values()), 2, filters)
        for pid in pids:
            self.assertEqual(proc_status(pid)["Uid"].split()[1], str(expected_host_uid()),
                             f"pid {pid}")
        stdout, stderr = proc.communicate(b"", timeout=30)
        self.assertEqual(proc.returncode, 0, stderr)
        self.assertEqual(parse_report(ready + stdout)["release"], "4.4.0")  # gVisor's, not ours

    def test_the_json_result_says_which_kernel_and_what_is_around_it(self):
        result = run(["run", "--json", *GVISOR, *TIMEOUT, "-c",
                      "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"])
        self.assertExit(result, 3)
        out = result.json()
        self.assertEqual((out["status"], out["exit_code"]), ("error", 3), out)
        self.assertEqual((out["stdout"], out["stderr"]), ("out\n", "err\n"))
        enforcement = out["enforcement"]
        self.assertEqual(enforcement["kernel"], "gvisor")
        self.assertEqual(enforcement["gvisor"]["platform"], "ptrace")
        self.assertIn("seccomp", enforcement["gvisor"]["inside"])
        self.assertNotIn("landlock", enforcement["degraded"])
        host = run(["run", "--json", *TIMEOUT, "-c", "pass"]).json()["enforcement"]
        self.assertEqual((host["kernel"], host["gvisor"]), ("host", None))

    def test_a_signal_is_an_exit_code_the_script_cannot_forge_into_a_verdict(self):
        # runsc reports a signal as 128 + N, which a script can exit with too: it stays an exit
        # code, and a self-made "SIGKILL" with runsc's own CPU counted is no CPU-limit verdict.
        # Nor can the script pass for runsc failing: 125 (pysandbox's own failure) and 128
        # (runsc's) are its own exit codes like any other.
        for code, status in (("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 137),
                             ("import sys; sys.exit(137)", 137),
                             ("import os, signal; os.kill(os.getpid(), signal.SIGXCPU)", 152),
                             ("import sys; sys.exit(152)", 152),
                             ("import sys; sys.exit(125)", 125),
                             ("import sys; sys.exit(128)", 128)):
            result = run(["run", "--json", *GVISOR, *TIMEOUT, "--cpu-time", "500ms", "-c", code])
            out = result.json()
            self.assertEqual((out["exit_code"], out["signal"], out["status"], result.returncode),
                             (status, None, "error", status), result.describe())

    def test_the_cpu_limit_is_the_supervisors_verdict(self):
        # gVisor's own limit would end the script with SIGXCPU, which runsc reports as exit code
        # 152 (above): pysandbox measures runsc's processes from the host and ends the sandbox at
        # the limit itself, long before the wall clock, beyond runsc's own start (about half a
        # second of CPU, which the limit does not count).
        started = time.monotonic()
        result = run(["run", "--json", *GVISOR, *TIMEOUT, "--cpu-time", "1s", "-c",
                      "while True:\n    pass"])
        out = result.json()
        self.assertEqual((out["status"], out["exit_code"], out["signal"]),
                         ("cpu_limit", None, "SIGKILL"), result.describe())
        self.assertGreaterEqual(out["usage"]["cpu_ms"], 1000, out)
        self.assertLess(time.monotonic() - started, 15, "ended by the wall clock")
        # A session's sandbox: the cell is the one that reached it, and the state is lost.
        cells = ["x = 1", "while True:\n    pass"]
        result = run(["session", *GVISOR, *TIMEOUT, "--cpu-time", "1s"],
                     input="".join(json.dumps({"code": c}) + "\n" for c in cells).encode())
        kept, spun = result.lines()
        self.assertEqual((kept["status"], spun["status"], spun["state"]),
                         ("ok", "cpu_limit", "lost"), result.describe())

    def start_serving(self) -> tuple[subprocess.Popen, int]:
        """`run --json` on gVisor of a script that waits for its stdin, once it runs: the process
        and the host pid of the sandbox's init."""
        proc = subprocess.Popen(
            [*command_prefix(), PYSANDBOX, "run", "--json", *GVISOR, *TIMEOUT, "-c",
             "import sys; open('/tmp/running', 'w'); sys.stdin.read()", "--", self.marker],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(proc.kill)
        own = os.readlink("/proc/self/ns/pid")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            init = [pid for pid in leftovers(self.marker)
                    if os.readlink(f"/proc/{pid}/ns/pid") != own]
            # The sandbox's /tmp, which gVisor's gofer serves the script, seen through runsc's
            # root (init's own /proc entries are not for the caller to read: it is undumpable).
            runsc = [pid for pid in sandbox_processes(init[0]) if parent(pid) == init[0]
                     ] if init else []
            if runsc and os.path.exists(f"/proc/{runsc[0]}/root/tmp/running"):
                return proc, init[0]
            time.sleep(0.02)  # a file that appears has no event the host can wait on
        self.fail(f"the script did not start on gVisor: {proc.communicate(b'')!r}")

    def result_of(self, proc: subprocess.Popen) -> tuple[dict, int]:
        stdout, stderr = proc.communicate(timeout=30)
        self.assertTrue(stdout, stderr)
        return json.loads(stdout), proc.returncode

    def test_runsc_dying_under_the_script_is_told_from_the_scripts_exit(self):
        # Told by runsc's log in its state directory, which neither the script nor gVisor can
        # write (inside/init.cpp, judge_runsc). gVisor's sandbox process, the script's kernel,
        # killed from the host: the script was killed (status and signal), as one killed from
        # the host on the host's kernel, never an exit code of its own (the test above).
        proc, init = self.start_serving()
        os.kill(runsc_sandbox(init), signal.SIGKILL)
        out, returncode = self.result_of(proc)
        self.assertEqual((out["status"], out["signal"], out["exit_code"], returncode),
                         ("killed", "SIGKILL", None, 128 + signal.SIGKILL), out)
        # runsc itself (init's child, which started gVisor and waits for it): pysandbox's own
        # failure, with the reason, whatever status the script would have had.
        proc, init = self.start_serving()
        runsc = [pid for pid in sandbox_processes(init) if parent(pid) == init]
        self.assertEqual(len(runsc), 1, runsc)
        os.kill(runsc[0], signal.SIGKILL)
        out, returncode = self.result_of(proc)
        self.assertEqual((out["status"], out["exit_code"], returncode),
                         ("sandbox_error", None, 125), out)
        self.assertIn("runsc was killed by signal 9", out["error"]["message"], out)

    def test_threads_start(self):
        # The profile's "ENOSYS" answers (clone3 first, then glibc falls back to clone) must be
        # ENOSYS inside gVisor too, whose runsc answers every errno rule with EPERM.
        for options in (GVISOR, ["-p", "paranoid"]):
            result = run(["run", "--json", *options, "--timeout", "20s", "-c",
                          "import threading; t = threading.Thread(target=print, args=('in a "
                          "thread',)); t.start(); t.join()"])
            self.assertEqual(result.json()["stdout"], "in a thread\n", result.describe())

    def test_limits_hold_under_gvisor(self):
        # The wall clock: the whole sandbox, runsc included, is gone at the limit.
        result = self.run_script("while True: pass", options=[*GVISOR, "--timeout", "3s"])
        self.assertExit(result, 124)
        self.assertEqual(leftovers(self.marker), [])
        # Output, to the byte, and /tmp's size; memory is gVisor's address-space limit.
        result = run(["run", "--json", *GVISOR, *TIMEOUT, "--output-limit", "1000", "--memory",
                      "200MiB", "--tmp-size", "1MiB", "-c", """
import errno
print("x" * 5000)
try:
    open("/tmp/big", "wb").write(b"y" * (2 << 20))
except OSError as e:
    print("tmp", errno.errorcode[e.errno])
try:
    b = bytearray(400 << 20)
except MemoryError:
    print("memory refused")
"""])
        out = result.json()
        self.assertEqual(out["bytes"]["stdout"], 5001 + len("tmp ENOSPC\n") +
                         len("memory refused\n"), out)
        self.assertTrue(out["truncated"]["stdout"])
        self.assertIn("memory refused", out["stdout"])
        self.assertIn("tmp ENOSPC", out["stdout"])

    def test_files_in_and_out(self):
        inputs = temp_dir()
        data = write_file(inputs / "data.txt", "from the host\n")
        out_dir = temp_dir(0o777)  # written by the caller, nobody included
        result = run(["run", "--json", *GVISOR, *TIMEOUT, "--input", str(data), "--output-dir",
                      str(out_dir), "-c", """
import os
text = open("data.txt").read()
open("result.txt", "w").write(text.upper())
# The root, runsc's state, and gVisor's own tmpfs (memory no limit of the script's counts).
for path in ("/usr/pysandbox-gvisor-probe", "/run/pysandbox-gvisor/state/x", "/dev/x",
             "/dev/shm/x", "/x"):
    try:
        open(path, "w")
        print("wrote", path)
    except OSError as e:
        print("refused", path, e.errno)
print(sorted(os.listdir("/run/pysandbox-gvisor")))
open("/dev/null", "w").write("discarded")
"""])
        self.assertExit(result, 0)
        self.assertEqual((out_dir / "result.txt").read_text(), "FROM THE HOST\n")
        self.assertNotIn("wrote", result.json()["stdout"])
        # Only the audit hook's channel (paranoid has a [policy]) of what is there.
        self.assertIn("['channel']", result.json()["stdout"],
                      "runsc's bundle and state are visible inside")
        self.assertFalse(os.path.exists("/usr/pysandbox-gvisor-probe"))
        self.assertEqual([f["path"] for f in result.json()["files"]], ["result.txt"])

    def test_the_profiles_seccomp_policy_is_enforced_by_gvisor(self):
        # strict has no sockets (base minimal) and kills on a denied call; paranoid is strict on
        # gVisor.
        # _socket, not socket: paranoid's audit hook denies the module, and this is about the
        # kernel layer under it.
        code = "import _socket; _socket.socket(_socket.AF_INET); print('made a socket')"
        result = run(["run", "--json", "-p", "paranoid", "--timeout", "20s", "-c", code])
        # SIGSYS, as runsc reports a signal: 128 + 31 (test_a_signal_is_an_exit_code...).
        self.assertEqual(result.json()["exit_code"], 128 + 31, result.describe())
        self.assertNotIn("made a socket", result.json()["stdout"])
        result = run(["run", "--json", *GVISOR, *TIMEOUT, "-c", code])
        self.assertEqual(result.json()["status"], "exception", result.describe())
        self.assertIn("PermissionError", result.json()["stderr"])

    def test_calls_the_profile_allows_are_served(self):
        # runsc names each call by gVisor's table; Debian 12's names pselect6 (select.select)
        # "pselect", which the OCI filter must name too, or the call gets EPERM.
        result = run(["run", "--json", *GVISOR, *TIMEOUT, "-c",
                      "import select; print(select.select([], [], [], 0.01))"])
        self.assertEqual(result.json()["stdout"], "([], [], [])\n", result.describe())

    def test_the_audit_hooks_records_come_out(self):
        # The hook inside gVisor reports on a host socket it connects to (plan/gvisor.hpp): the
        # result confirms it and lists its blocks as on the host kernel. The script then tries the
        # socket itself (a policy that lets it connect): a second connection is refused, and the
        # socket's directory is read-only. paranoid allows no socket: its hook connects before
        # the seal takes socket() and connect() back (plan/gvisor.hpp), and is confirmed with its
        # blocks all the same; the script's own socket() then ends it (paranoid kills). The
        # seal went in through pysandbox's native helper, made outside the import system: no
        # module of it is left, in sys.modules or anywhere the garbage collector reaches, and
        # ctypes, which paranoid's policy denies, is still an import the hook sees.
        only_system = profile('extends = "default"\n\n[policy]\ndeny_calls = ["os.system"]\n')
        result = run(["run", "--json", "-p", "paranoid", *TIMEOUT, "-c", """
import os, sys
try:
    os.system("true")
except PermissionError:
    print("blocked")
import gc
print(sorted(name for name in sys.modules if "ctypes" in name or "helper" in name),
      [o.__name__ for o in gc.get_objects() if type(o) is type(os) and "helper" in o.__name__])
try:
    import ctypes
except PermissionError:
    print("ctypes blocked")
print(os.listdir("/run/pysandbox-gvisor/channel"), flush=True)
import _socket
_socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
print("made a socket")
"""])
        out = result.json()
        self.assertEqual(out["enforcement"]["audit_hook"], "installed", result.describe())
        self.assertEqual((out["exit_code"], out["stdout"]),
                         (128 + 31, "blocked\n[] []\nctypes blocked\n['policy']\n"),
                         result.describe())
        self.assertCountEqual(out["violations"], [
            {"kind": "call", "what": "os.system", "count": 1, "action": "denied"},
            {"kind": "import", "what": "ctypes", "count": 1, "action": "denied"}])
        result = run(["run", "--json", "-p", str(only_system), *GVISOR, *TIMEOUT, "-c", """
import _socket, os
try:
    os.system("true")
except PermissionError:
    pass
for path in os.listdir("/run/pysandbox-gvisor/channel"):
    path = "/run/pysandbox-gvisor/channel/" + path
    other = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    try:
        other.connect(path)
        other.send(b"call\tforged.by.a.second.connection")
        print("connected")
    except OSError as e:
        print("refused", e.errno)
    try:
        os.unlink(path)
        print("unlinked")
    except OSError as e:
        print("kept", e.errno)
"""])
        out = result.json()
        self.assertEqual(out["enforcement"]["audit_hook"], "installed", result.describe())
        self.assertEqual(out["stdout"], "refused 111\nkept 30\n", result.describe())
        self.assertEqual((out["status"], out["violations"]), ("ok", [
            {"kind": "call", "what": "os.system", "count": 1, "action": "denied"}]))

    def test_a_session_keeps_one_gvisor_sandbox_across_cells(self):
        on_gvisor = profile('extends = "default"\n\n[sandbox]\nkernel = "gvisor"\n\n'
                            '[policy]\ndeny_calls = ["os.system"]\n')
        # The driver reaches its channel through a socket it connects to (plan/gvisor.hpp): the
        # cells run in one warm sandbox on gVisor's kernel, each with its own hook records.
        cells = [
            "import os; state = os.uname().release; print(state)",
            "import os\ntry:\n    os.system('true')\nexcept PermissionError:\n    print('blocked')",
            "print(state)",
        ]
        result = run(["session", "-p", str(on_gvisor)],
                     input="".join(json.dumps({"code": c}) + "\n" for c in cells).encode())
        self.assertExit(result, 0)
        first, blocked, again = result.lines()
        self.assertNotEqual(first["stdout"], os.uname().release + "\n", "the host's kernel")
        self.assertEqual(again["stdout"], first["stdout"], "the sandbox was not kept")
        self.assertEqual({r["sandbox"] for r in (first, blocked, again)}, {1}, result.describe())
        self.assertEqual(first["enforcement"]["kernel"], "gvisor")
        self.assertEqual((blocked["stdout"], blocked["violations"]), ("blocked\n", [
            {"kind": "call", "what": "os.system", "count": 1, "action": "denied"}]))
        self.assertEqual((first["violations"], again["violations"]), ([], []))

    def test_a_cells_usage_is_what_gvisors_processes_cost_the_host(self):
        # The script runs in runsc's sentry and its ptrace stubs, not in runsc (the interpreter
        # on the host kernel): a cell's CPU time is theirs, as the host counts it, over the cell.
        # gVisor's own clock runs ahead of the host's on a loaded machine: 0.5 s of it is at
        # least 0.2 s of the host's.
        spin = ("import time\nt = time.process_time()\n"
                "while time.process_time() - t < 0.5:\n    pass")
        cells = ["1", spin, "1"]
        result = run(["session", *GVISOR, *TIMEOUT],
                     input="".join(json.dumps({"code": c}) + "\n" for c in cells).encode())
        self.assertExit(result, 0)
        before, spun, after = (line["usage"] for line in result.lines())
        self.assertGreaterEqual(spun["cpu_ms"], 200, result.describe())
        # Each cell's own, not the session's so far: an idle cell costs gVisor little.
        self.assertLess(after["cpu_ms"], 100, result.describe())
        self.assertLess(before["cpu_ms"], 100, result.describe())

    def test_a_session_on_paranoid_is_sealed(self):
        # paranoid allows the script no socket: the driver's and the hook's channels are
        # connected before the seal (plan/gvisor.hpp), the cells run, the hook reports, and a
        # cell's own socket() ends its sandbox (paranoid kills), which the next cell replaces.
        cells = [
            "import os\ntry:\n    os.system('true')\nexcept PermissionError:\n    print('blocked')",
            "import _socket\n_socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)\nprint('made')",
            "print(6 * 7)",
        ]
        result = run(["session", "-p", "paranoid"],
                     input="".join(json.dumps({"code": c}) + "\n" for c in cells).encode())
        self.assertExit(result, 0)
        blocked, socket, after = result.lines()
        self.assertEqual((blocked["status"], blocked["stdout"], blocked["violations"]),
                         ("ok", "blocked\n", [{"kind": "call", "what": "os.system", "count": 1,
                                               "action": "denied"}]), result.describe())
        self.assertEqual(blocked["enforcement"]["audit_hook"], "installed", result.describe())
        self.assertEqual((socket["exit_code"], socket["stdout"]), (128 + 31, ""),
                         result.describe())
        self.assertEqual((after["status"], after["stdout"]), ("ok", "42\n"), result.describe())
        self.assertEqual(after["sandbox"], 2, result.describe())
        # Fail closed: where site does not run (-S, allowed without a [policy]), nothing seals
        # the channel, and the driver does not connect it itself: the session ends with 125
        # before any cell runs.
        without_site = profile('extends = "paranoid"\n\n[python]\nargs = ["-s", "-S"]\n\n'
                               '[policy]\ndeny_imports = []\ndeny_calls = []\n')
        result = run(["session", "-p", str(without_site)],
                     input=json.dumps({"code": "print('ran')"}).encode() + b"\n")
        self.assertExit(result, 125)
        self.assertNotIn(b"ran", result.stdout)

    def test_batch_and_mcp_run_on_gvisor(self):
        # paranoid too: its channels are sealed (test_a_session_on_paranoid_is_sealed).
        for on_gvisor in (str(profile('extends = "default"\n\n[sandbox]\nkernel = "gvisor"\n')),
                          "paranoid"):
            with self.subTest(profile=on_gvisor):
                self.check_batch_and_mcp(on_gvisor)

    def check_batch_and_mcp(self, on_gvisor: str):
        release = "import os; print(os.uname().release)"
        result = run(["batch", "-p", on_gvisor, str(jobs_file([{"code": release}] * 2))])
        self.assertExit(result, 0)
        lines = result.lines()
        self.assertEqual(len(lines), 2, result.describe())
        for line in lines:
            self.assertEqual(line["status"], "ok", result.describe())
            self.assertNotEqual(line["stdout"], os.uname().release + "\n", "the host's kernel")
        requests = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                        "clientInfo": {"name": "test", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "run_python", "arguments": {"code": release}}},
        ]
        result = run(["mcp", "-p", on_gvisor],
                     input="".join(json.dumps(r) + "\n" for r in requests).encode())
        answers = [json.loads(line) for line in result.stdout.splitlines()]
        call = [a for a in answers if a.get("id") == 2]
        self.assertEqual(len(call), 1, result.describe())
        self.assertFalse(call[0]["result"]["isError"], result.describe())
        text = call[0]["result"]["content"][0]["text"]
        self.assertTrue(text and text != os.uname().release + "\n", text)

    def test_refused_with_125_and_a_fix_when_gvisor_cannot_be_used(self):
        # No runsc on the PATH: never the host kernel instead.
        # A PATH with setpriv (how the suite runs as nobody) and nothing else.
        tools = temp_dir()
        os.symlink("/usr/bin/setpriv", tools / "setpriv")
        result = run(["run", *GVISOR, "-c", "print('ran')"],
                     env={**os.environ, "PATH": str(tools)})
        self.assertExit(result, 125)
        self.assertNotIn(b"ran", result.stdout)
        self.assertIn(b"apt-get install runsc", result.stderr)
        # What it cannot do: the proxy, and a fork server (for now).
        result = run(["run", *GVISOR, "--allow", "example.com:80", "-c", "pass"])
        self.assertExit(result, 125)
        self.assertIn(b"proxy", result.stderr)
        jobs = jobs_file([{"code": "print(1)"}])
        on_gvisor = str(profile('extends = "default"\n\n[sandbox]\nkernel = "gvisor"\n'))
        result = run(["batch", "--fork", "-p", on_gvisor, str(jobs)])
        self.assertEqual(result.returncode, 125, result.describe())
        self.assertIn(b"gvisor", result.stderr)
        self.assertIn(b"--fork", result.stderr)

    def test_a_runsc_other_users_could_replace_is_refused(self):
        # runsc is the sandbox's kernel: one another user planted on the caller's PATH would run
        # the script without gVisor while the result said gVisor.
        tools = temp_dir()
        os.symlink("/usr/bin/setpriv", tools / "setpriv")
        fake = "#!/bin/sh\necho planted runsc ran\n"
        # Not under /tmp, which the sandbox covers with its own: the runsc found is bound in.
        writable = temp_dir(0o777, parent="/var/tmp")  # anyone may put a runsc here
        write_file(writable / "runsc", fake, 0o755)
        foreign = temp_dir(parent="/var/tmp")  # a runsc that another user owns
        write_file(foreign / "runsc", fake, 0o755, owner=12345)
        for directory in (writable, foreign):
            result = run(["run", *GVISOR, *TIMEOUT, "-c", "print('ran')"],
                         env={**os.environ, "PATH": f"{directory}:{tools}"})
            self.assertExit(result, 125)
            self.assertNotIn(b"ran", result.stdout)
            self.assertIn(b"another user could replace gVisor", result.stderr)

    def test_arguments_that_are_not_utf8_are_refused_clearly(self):
        # The bundle is JSON, which holds only UTF-8: refused as bad input, never an internal
        # error, and never other bytes than the caller's.
        result = run(["run", *GVISOR, *TIMEOUT, "-c", "print('ran')", "--", b"\xff".decode(
            "utf-8", "surrogateescape")])
        self.assertExit(result, 125)
        self.assertNotIn(b"ran", result.stdout)
        self.assertNotIn(b"internal error", result.stderr)
        self.assertIn(b"not UTF-8", result.stderr)

    def test_the_clone_flags_check_holds_inside(self):
        # The profile's argument checks reach gVisor as OCI comparisons (clone's flags: masked
        # equal, whose mask and value OCI names value and valueTwo). datascience allows
        # processes but no new namespace; ctypes goes under the audit hook.
        result = run(["run", "--json", "-p", "datascience", *GVISOR, *TIMEOUT, "-c", """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
for name, flag in (("user", 0x10000000), ("mount", 0x20000), ("net", 0x40000000), ("none", 0)):
    pid = libc.syscall(56, flag | 17, 0, 0, 0, 0)  # clone(flag | SIGCHLD)
    if pid == 0:
        os._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)
    print(name, "child" if pid > 0 else errno.errorcode[ctypes.get_errno()])
"""])
        self.assertEqual(result.json()["stdout"],
                         "user EPERM\nmount EPERM\nnet EPERM\nnone child\n", result.describe())


if __name__ == "__main__":
    unittest.main()
