"""The seccomp policy: denied calls are EPERM and counted by name; real work still runs; a
profile can deny more or allow back; action = "kill" ends the sandbox; doctor and user-namespace
refusal."""

import os
import shutil
import subprocess
import unittest

from harness import PYSANDBOX, SandboxTestCase, command_prefix, profile, run, temp_dir


# These tests are about the seccomp layer. The [policy] audit hook would refuse some of these
# calls before the kernel sees them (test_audit.py tests it), so it is off here: what a test sees
# is the kernel's answer.
NO_HOOK = "\n[policy]\ndeny_imports = []\ndeny_calls = []\n"


def policy_profile(body: str):
    return profile('extends = "default"\n\n' + body + NO_HOOK)


def kernel_only():
    return ["-p", str(policy_profile(""))]


# The system calls a process-creating call reaches the kernel with (glibc's fork is clone;
# posix_spawn and subprocess use vfork or clone(CLONE_VM|CLONE_VFORK), or clone3).
PROCESS_CALLS = {"clone", "clone3", "fork", "vfork"}


def run_json(args, **kwargs):
    """Run ``pysandbox run --json ARGS``; return (result, the parsed result object)."""
    r = run(["run", "--json", *args], **kwargs)
    return r, r.json()


def denied(what, count=1, action="denied"):
    """A seccomp denial as the result's violations list it."""
    return {"kind": "syscall", "what": what, "count": count, "action": action}


class DeniedCallsTest(SandboxTestCase):
    # What the script prints about a refusal is its own word. Each test also reads the result's
    # violations, which pysandbox's supervisor fills from the kernel's seccomp notifications on
    # the host side: the denial must be there, under the system call's name.

    def assertProcessCallsDenied(self, obj):
        """violations: only seccomp denials of process-creating calls, at least one."""
        self.assertTrue(obj["violations"], "no system call was denied")
        for v in obj["violations"]:
            self.assertEqual((v["kind"], v["action"]), ("syscall", "denied"), obj["violations"])
            self.assertIn(v["what"], PROCESS_CALLS, obj["violations"])
            self.assertGreaterEqual(v["count"], 1)

    def test_fork_is_eperm_and_named_on_stderr(self):
        code = "import os\ntry:\n    os.fork()\nexcept PermissionError as e:\n    print('denied', e.errno)\n"
        r = run(["run", *kernel_only(), "-c", code])
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertEqual(r.stdout, b"denied 1\n")
        self.assertIn(b"pysandbox: the sandbox policy denied 1 system call: ", r.stderr)
        self.assertRegex(r.stderr, rb"clone|fork")
        r, obj = run_json([*kernel_only(), "-c", code])
        self.assertEqual((obj["status"], obj["stdout"]), ("ok", "denied 1\n"), r.describe())
        self.assertEqual(len(obj["violations"]), 1, obj["violations"])
        self.assertProcessCallsDenied(obj)
        self.assertEqual(obj["violations"][0]["count"], 1)

    def test_subprocess_is_refused_not_hung(self):
        # The program would leave a file in the workdir: the host sees whether it ran.
        wd = temp_dir(0o777)
        r, obj = run_json([*kernel_only(), "--workdir", wd, "--timeout", "5s", "-c",
                           "import subprocess\ntry:\n"
                           "    subprocess.run(['/bin/sh', '-c', 'echo > /tmp/work/ran'])\n"
                           "except PermissionError:\n    print('refused')\n"], timeout=15)
        self.assertEqual((r.returncode, obj["stdout"]), (0, "refused\n"), r.describe())
        self.assertLess(r.elapsed, 4)
        self.assertEqual(os.listdir(wd), [], "the program ran")
        self.assertProcessCallsDenied(obj)

    def test_inet_socket_denied_unix_socket_allowed(self):
        # A family the sandbox does not offer is refused as a kernel without it would refuse it:
        # EAFNOSUPPORT (it was EPERM before the allowlist; code that handles a missing family
        # expects this one).
        code = ("import errno, socket\ns = socket.socketpair(); print('unix ok')\n"
                "try:\n    socket.socket(socket.AF_INET6)\nexcept OSError as e:\n"
                "    print('inet6 denied', errno.errorcode[e.errno])\n")
        r, obj = run_json([*kernel_only(), "-c", code])
        self.assertEqual(obj["stdout"], "unix ok\ninet6 denied EAFNOSUPPORT\n", r.describe())
        # One denial, the inet6 socket(); the unix socketpair() went through.
        self.assertEqual(obj["violations"], [denied("socket")])

    def test_verbose_lists_each_denied_call(self):
        r = run(["run", *kernel_only(), "-v", "-c",
                 "import socket\nfor _ in range(3):\n    try: socket.socket(socket.AF_INET)\n"
                 "    except OSError: pass\n"])
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertEqual(r.stderr.count(b"pysandbox: denied socket\n"), 3, r.describe())
        self.assertIn(b"denied 3 system calls: socket x3", r.stderr)

    def test_threads_work(self):
        r = run(["run", *kernel_only(), "-c",
                 "import threading\nout = []\nts = [threading.Thread(target=out.append, args=(i,)) for i in range(8)]\n"
                 "[t.start() for t in ts]; [t.join() for t in ts]\nprint(sorted(out))\n"])
        self.assertEqual(r.stdout, b"[0, 1, 2, 3, 4, 5, 6, 7]\n", r.describe())
        self.assertNotIn(b"denied", r.stderr)


class RealWorkTest(SandboxTestCase):
    NEEDS_MODULES = ("numpy", "pandas", "matplotlib")

    def test_numpy_multithreaded_arithmetic_runs_clean(self):
        code = ("import numpy as np\n"
                "from concurrent.futures import ThreadPoolExecutor\n"
                "a = np.arange(400 * 400, dtype=float).reshape(400, 400) / 1e5\n"
                "with ThreadPoolExecutor(4) as pool:\n"
                "    sums = list(pool.map(lambda k: float((a @ a.T).trace() + k), range(4)))\n"
                "print(round(sums[0], 3), len(sums))\n")
        r = run(["run", "--timeout", "20s", "-c", code], timeout=40)
        self.assertEqual(r.returncode, 0, r.describe())
        expected = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True).stdout
        self.assertEqual(r.stdout, expected)
        self.assertEqual(r.stderr, b"", "the default policy must not deny anything numpy does")

    def test_pandas_and_matplotlib_run_clean(self):
        # Both are required (NEEDS_MODULES): where one is missing the test fails, it does not
        # quietly test less. The plot lands in the workdir, where the host reads it.
        wd = temp_dir(0o777)
        code = ("import pandas as pd\nimport matplotlib.pyplot as plt\n"
                "df = pd.DataFrame({'x': [1, 2, 3], 'y': [3, 1, 2]})\n"
                "plt.plot(df['x'], df['y']); plt.savefig('/tmp/work/p.png')\nprint('ok', len(df))\n")
        r = run(["run", "-p", "datascience", "--workdir", wd, "-c", code], timeout=60)
        self.assertEqual((r.returncode, r.stdout), (0, b"ok 3\n"), r.describe())
        self.assertTrue((wd / "p.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n"))
        self.assertNotIn(b"denied", r.stderr)

    def test_datascience_allows_multiprocessing(self):
        code = ("import multiprocessing as mp\nctx = mp.get_context('fork')\n"
                "p = ctx.Process(target=print, args=('child',)); p.start(); p.join()\n"
                "print('exit', p.exitcode)\n")
        r = run(["run", "-p", "datascience", "-c", code], timeout=60)
        self.assertEqual(r.stdout, b"child\nexit 0\n", r.describe())


class ProfilePolicyTest(SandboxTestCase):
    def test_profile_denies_more(self):
        p = policy_profile('[seccomp]\ndeny = ["getcwd"]\n')
        r, obj = run_json(["-p", str(p), "-c",
                           "import os\ntry:\n    os.getcwd()\nexcept PermissionError:\n    print('getcwd denied')\n"])
        self.assertEqual(obj["stdout"], "getcwd denied\n", r.describe())
        self.assertEqual(obj["violations"], [denied("getcwd")])

    def test_profile_allows_a_default_denial_back(self):
        p = policy_profile('[seccomp]\nallow = ["memfd_create"]\n')
        code = "import os\nos.close(os.memfd_create('x'))\nprint('memfd ok')\n"
        r, obj = run_json(["-p", str(p), "-c", code])
        self.assertEqual((obj["status"], obj["stdout"]), ("ok", "memfd ok\n"), r.describe())
        self.assertEqual(obj["violations"], [])
        # The control: the default profile denies it, and says so (not just any failure).
        r, obj = run_json(["-c", code])
        self.assertEqual(obj["status"], "exception", r.describe())
        self.assertEqual(obj["violations"], [denied("memfd_create")])

    def test_unknown_syscall_name_is_a_profile_error(self):
        p = policy_profile('[seccomp]\ndeny = ["getcwd", "no_such_call"]\n')
        r = run(["run", "-p", str(p), "-c", "print(1)"])
        self.assertEqual(r.returncode, 125, r.describe())
        self.assertIn(f"{p}:4:8: seccomp.deny: unknown system call \"no_such_call\"".encode(), r.stderr)
        self.assertEqual(r.stdout, b"")

    def test_kill_action_ends_the_sandbox(self):
        p = policy_profile('[seccomp]\naction = "kill"\n')
        r = run(["run", "-p", str(p), "-c",
                 "import os, sys\nprint('before', flush=True)\ntry:\n    os.fork()\nexcept OSError:\n    pass\n"
                 "print('after')\n"])
        self.assertEqual(r.returncode, 128 + 31, r.describe())
        self.assertEqual(r.stdout, b"before\n")
        self.assertIn(b"is denied by the sandbox policy; the sandbox was killed", r.stderr)
        r, obj = run_json(["-p", str(p), "-c", "import os\nos.fork()\nprint('after')\n"])
        self.assertEqual((obj["status"], obj["stdout"]), ("policy_violation", ""), r.describe())
        self.assertEqual(len(obj["violations"]), 1, obj["violations"])
        v = obj["violations"][0]
        self.assertEqual((v["kind"], v["count"], v["action"]), ("syscall", 1, "killed"))
        self.assertIn(v["what"], PROCESS_CALLS)


class HostSupportTest(SandboxTestCase):
    def test_doctor_passes_here(self):
        r = run(["doctor"], timeout=60)
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn(b"ok    end-to-end sandbox", r.stdout)
        self.assertIn(b"Landlock: ABI", r.stdout)

    def test_refused_user_namespaces_fail_closed_with_the_fix(self):
        unshare = shutil.which("unshare")
        self.assertIsNotNone(unshare, "util-linux unshare is needed for this test")
        inner = (f"echo 0 > /proc/sys/user/max_user_namespaces && "
                 f"exec {PYSANDBOX} run -c 'open(\"/tmp/should-not-run\", \"w\")'")
        proc = subprocess.run(command_prefix() + [unshare, "-U", "-r", "--fork", "sh", "-c", inner],
                              capture_output=True, timeout=30)
        self.assertEqual(proc.returncode, 125, proc.stderr)
        self.assertIn(b"clone3(CLONE_NEWUSER", proc.stderr)
        self.assertIn(b"user.max_user_namespaces", proc.stderr)
        doctor = subprocess.run(command_prefix() + [unshare, "-U", "-r", "--fork", "sh", "-c",
                                "echo 0 > /proc/sys/user/max_user_namespaces && exec " + PYSANDBOX + " doctor"],
                                capture_output=True, timeout=30)
        self.assertEqual(doctor.returncode, 1)
        self.assertIn(b"FAIL  user namespaces", doctor.stdout)
        # The fix persists the setting (/etc/sysctl.d), as doctor's every sysctl fix does.
        self.assertIn(b"fix: echo user.max_user_namespaces=15000 | sudo tee /etc/sysctl.d/",
                      doctor.stdout)


if __name__ == "__main__":
    unittest.main()
