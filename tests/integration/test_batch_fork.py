"""`pysandbox batch --fork` (BATCH in pysandbox(1)): jobs forked by a zygote give the same result
lines as plain batch, each valid under the result schema, and nothing of
the zygote or a job outlives the batch.

Judged from the host: the result lines, their statuses and fields, the batch's exit status and
wall time, the artifact's hash, and no live process carrying the run's marker afterwards (the
marker is a [python] preload module that does not exist: the zygote's command line, which every
job inherits, carries it).
"""

import errno
import hashlib
import json
import os
import signal
import subprocess
import time
import unittest

from harness import (PYSANDBOX, SandboxTestCase, command_prefix, jobs_file, marked_profile,
                     preload_marker, run, wait_for_no_leftovers, result_schema)


def jsonl(*jobs) -> bytes:
    return b"".join(json.dumps(job).encode() + b"\n" for job in jobs)


def find_processes(marker, where, count=1, timeout=10.0):
    """The host PIDs of `count` processes of the zygote's (their command lines carry the run's
    marker) for which `where(pid, nspid)` holds (nspid: the PID in each namespace, outermost
    first); fewer when they did not all appear in time."""
    deadline = time.monotonic() + timeout
    while True:
        found = []
        for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
            try:
                cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
                status = open(f"/proc/{pid}/status").read()
            except OSError:
                continue
            nspid = status.split("NSpid:")[1].split("\n")[0].split()
            if marker.encode() in cmdline and b"pysandbox_zygote" in cmdline and \
                    where(pid, nspid):
                found.append(pid)
        if len(found) >= count or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)


def find_process(marker, where, timeout=10.0):
    found = find_processes(marker, where, 1, timeout)
    return found[0] if found else None


# A job's interpreter (or a warm one's): PID 2 under its own init, one level below the zygote's.
def is_job(pid, nspid):
    return len(nspid) == 3 and nspid[2] == "2"


# A job that has begun: its code made /tmp/started, seen from the host in the job's own root.
def has_started(pid, nspid):
    return is_job(pid, nspid) and os.path.exists(f"/proc/{pid}/root/tmp/started")


class BatchForkTest(SandboxTestCase):
    def batch(self, *jobs, options=(), timeout=60, base="default", extra="", parallel=2):
        marker = preload_marker()
        marked = marked_profile(marker, base, extra)
        r = run(["batch", "--fork", "-j", str(parallel), "--keep-order", "-p", str(marked),
                 *options, "-"],
                input=jsonl(*jobs), timeout=timeout)
        self.assertEqual(r.returncode, 0, r.describe())
        lines = [json.loads(line) for line in r.stdout.decode().splitlines()]
        self.assertEqual(len(lines), len(jobs), r.describe())
        for line, job in zip(lines, jobs):
            result_schema.validate(line)
            self.assertEqual(line["id"], job["id"])
        self.assertEqual(wait_for_no_leftovers(marker, 5.0), [], "a zygote or job outlived it")
        return {line["id"]: line for line in lines}

    def test_statuses_files_and_denials(self):
        content = "a,b\n1,2\n"
        results = self.batch(
            {"id": "ok", "code": "print(sum(range(1000)))"},
            {"id": "error", "code": "import sys; sys.exit(3)"},
            {"id": "exception", "code": "raise ValueError('boom')"},
            {"id": "timeout", "code": "while True: pass", "timeout": "1s"},
            {"id": "flood", "code": "import sys\nfor i in range(100000): print('x' * 99)"},
            {"id": "file", "code": f"open('out.csv', 'w').write({content!r})"},
            {"id": "denied", "code": "import socket\n"
                                     "try:\n    socket.socket(socket.AF_INET)\n"
                                     "except OSError as e:\n    print(e.errno)"},
            options=("--output-limit", "64KiB"),
        )
        self.assertEqual(results["ok"]["status"], "ok")
        self.assertEqual(results["ok"]["stdout"], "499500\n")
        self.assertEqual((results["error"]["status"], results["error"]["exit_code"]), ("error", 3))
        self.assertEqual(results["exception"]["status"], "exception")
        self.assertEqual(results["exception"]["exception"]["type"], "ValueError")
        self.assertEqual(results["timeout"]["status"], "timeout")
        self.assertLess(results["timeout"]["usage"]["wall_ms"], 3000)
        self.assertEqual(results["flood"]["status"], "output_limit")
        files = {f["path"]: f for f in results["file"]["files"]}
        self.assertIn("out.csv", files, results["file"])
        self.assertEqual(files["out.csv"]["sha256"], hashlib.sha256(content.encode()).hexdigest())
        denied = results["denied"]
        self.assertEqual(denied["stdout"], "97\n")  # EAFNOSUPPORT, as plain batch answers
        self.assertIn({"kind": "syscall", "what": "socket", "count": 1, "action": "denied"},
                      denied["violations"])

    def test_a_job_is_contained_in_namespaces_of_its_own(self):
        probe = ("import os, ctypes\n"
                 "libc = ctypes.CDLL(None, use_errno=True)\n"
                 "print(os.getpid(), sorted(os.listdir('/proc'))[:0], libc.unshare(0x10000000),"
                 " ctypes.get_errno())\n"
                 "print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n"
                 "print(os.path.exists('/proc/kallsyms') and open('/proc/kallsyms').read(64))\n")
        results = self.batch({"id": "a", "code": probe}, {"id": "b", "code": probe})
        for line in results.values():
            self.assertEqual(line["status"], "ok", line)
            first, caps, kallsyms = line["stdout"].splitlines()
            # PID 2 of its own namespace, under an init of its own as `run`'s script is; no new
            # user namespace for it, no capability.
            self.assertEqual(first, "2 [] -1 1")
            self.assertEqual(int(caps, 16), 0)
            self.assertEqual(kallsyms, "")  # masked: /dev/null bound over it

    def test_with_processes_allowed_the_job_has_an_init(self):
        # datascience allows processes: PID 1 stays an init, the job is PID 2, so a signal it
        # sends itself ends it as it would end any process, and its orphans are reaped.
        results = self.batch(
            {"id": "pid", "code": "import os; print(os.getpid(), os.getppid())"},
            {"id": "signal", "code": "import os, signal; os.kill(os.getpid(), signal.SIGXCPU)"},
            {"id": "orphan", "code": "import os, time\nif os.fork() == 0:\n    time.sleep(60)\n"
                                     "print('parent')"},
            base="datascience")
        self.assertEqual(results["pid"]["stdout"], "2 1\n")
        self.assertEqual((results["signal"]["status"], results["signal"]["signal"]),
                         ("killed", "SIGXCPU"))
        self.assertEqual(results["orphan"]["status"], "ok")

    def test_many_jobs_at_once_do_not_deadlock_the_zygote_channel(self):
        # 200 requests at once fill the zygote's channel both ways (a regression: the supervisor
        # blocked on a full channel while the zygote blocked on the other direction).
        jobs = [{"id": i, "code": f"print({i})"} for i in range(200)]
        results = self.batch(*jobs, parallel=128, timeout=120)
        self.assertEqual({r["status"] for r in results.values()}, {"ok"})
        self.assertEqual(results[199]["stdout"], "199\n")

    def test_descriptors_a_job_keeps_in_flight_fail_no_other_job(self):
        # The kernel counts descriptors in flight (SCM_RIGHTS) per host user, against the
        # sender's open-files limit, and every job is the same host user. A job parks as many as
        # its own limit lets it (raw libc: the audit hook is not the boundary); the jobs that
        # start meanwhile hand their listener and /tmp/work over before their limit is set, with
        # the zygote's (pysandbox's own) limit, so they start. (A regression: they all failed.)
        hog = ("import ctypes, os, struct, time\n"
               "libc = ctypes.CDLL(None, use_errno=True)\n"
               "pair = (ctypes.c_int * 2)()\n"
               "assert libc.socketpair(1, 1, 0, pair) == 0\n"
               "class iovec(ctypes.Structure):\n"
               "    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
               "class msghdr(ctypes.Structure):\n"
               "    _fields_ = [('name', ctypes.c_void_p), ('namelen', ctypes.c_uint32),\n"
               "                ('iov', ctypes.POINTER(iovec)), ('iovlen', ctypes.c_size_t),\n"
               "                ('control', ctypes.c_void_p), ('controllen', ctypes.c_size_t),\n"
               "                ('flags', ctypes.c_int)]\n"
               "data = ctypes.create_string_buffer(b'x')\n"
               "iov = iovec(ctypes.cast(data, ctypes.c_void_p), 1)\n"
               "cmsg = ctypes.create_string_buffer(struct.pack('QiiI', 20, 1, 1, pair[1]) + bytes(4))\n"
               "parked = 0\n"
               "while libc.sendmsg(pair[0], ctypes.byref(msghdr(None, 0, ctypes.pointer(iov), 1,\n"
               "        ctypes.cast(cmsg, ctypes.c_void_p), 24, 0)), 0) >= 0:\n"
               "    parked += 1\n"
               "print(parked, ctypes.get_errno(), flush=True)\n"
               "time.sleep(3)\n")
        jobs = [{"id": 0, "code": hog}] + [
            {"id": i, "code": f"import time; time.sleep(0.2 * {i}); print({i})"}
            for i in range(1, 9)]
        results = self.batch(*jobs, parallel=4, timeout=60)
        # The host user's descriptors in flight are at the limit: the hog's last send failed
        # with ETOOMANYREFS. How many it parked itself depends on what else runs as that user
        # meanwhile (the same test run as root and as nobody: their jobs are one host user), so
        # none at all when the other run's hog got there first.
        _parked, error = map(int, results[0]["stdout"].split())
        self.assertEqual(error, errno.ETOOMANYREFS, results[0])
        for i in range(1, 9):
            self.assertEqual((results[i]["status"], results[i]["stdout"]), ("ok", f"{i}\n"),
                             results[i])

    def test_a_job_holds_only_its_own_descriptors(self):
        # A cloned sandbox's execve closes init's report socket (close-on-exec); a forked job
        # never execs, and a job holding that socket could send its supervisor records of its
        # own. Judged from the host, on the running job: stdio, the audit channel (4) and its
        # channel (5), nothing else.
        marker = preload_marker()
        marked = marked_profile(marker)
        wait = ("import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
                "open('/tmp/started', 'w').close()\n"
                "signal.sigwait({signal.SIGUSR1})\nprint('released')")
        jobs = jobs_file([{"id": "j", "code": wait, "timeout": "30s"}])
        proc = subprocess.Popen(command_prefix() + [PYSANDBOX, "batch", "--fork", "-j", "1",
                                                    "-p", str(marked), str(jobs)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            job = find_process(marker, has_started)  # SIGUSR1 is blocked by then
            self.assertIsNotNone(job, "no job found")
            fds = sorted(map(int, os.listdir(f"/proc/{job}/fd")))
            os.kill(job, signal.SIGUSR1)
        finally:
            out, err = proc.communicate(timeout=60)
        self.assertEqual(fds, [0, 1, 2, 4, 5])
        self.assertEqual(json.loads(out)["stdout"], "released\n", out)
        self.assertEqual(wait_for_no_leftovers(marker, 5.0), [], "a zygote or job outlived it")

    def test_an_init_without_an_audit_channel(self):
        # No [policy]: one descriptor fewer reaches the job (a regression: its init failed).
        results = self.batch({"id": "x", "code": "print(1)"}, base="datascience",
                             extra="[policy]\ndeny_imports = []\ndeny_calls = []\n")
        self.assertEqual((results["x"]["status"], results["x"]["stdout"]), ("ok", "1\n"))

    def test_the_audit_hook_is_the_jobs(self):
        results = self.batch({"id": "p", "code": "import subprocess; subprocess.run(['true'])"})
        self.assertEqual(results["p"]["status"], "policy_violation", results["p"])

    def test_a_zygote_that_dies_fails_its_jobs_and_is_replaced(self):
        marker = preload_marker()
        marked = marked_profile(marker)
        jobs = [{"id": i, "code": "import time; open('/tmp/started', 'w').close(); time.sleep(3)"}
                for i in range(2)]
        jobs += [{"id": 10 + i, "code": "print('after')"} for i in range(2)]
        jobs = jobs_file(jobs)
        proc = subprocess.Popen(command_prefix() + [PYSANDBOX, "batch", "--fork", "-j", "2",
                                                    "-p", str(marked), str(jobs)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # The zygote: the marker's python at depth 2 (its jobs are one level deeper).
        zygote = find_process(marker, lambda pid, nspid: len(nspid) == 2 and nspid[1] != "1")
        self.assertIsNotNone(zygote, "no zygote found")
        self.assertEqual(len(find_processes(marker, has_started, 2)), 2, "the slow jobs never ran")
        os.kill(zygote, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
        results = {r["id"]: r for r in map(json.loads, out.decode().splitlines())}
        for r in results.values():
            result_schema.validate(r)
        self.assertEqual({i: results[i]["status"] for i in (0, 1)},
                         {0: "sandbox_error", 1: "sandbox_error"}, out)
        self.assertEqual({i: results[i]["stdout"] for i in (10, 11)}, {10: "after\n", 11: "after\n"})
        self.assertEqual(proc.returncode, 125, err)  # a job's sandbox failed
        self.assertEqual(wait_for_no_leftovers(marker, 5.0), [], "a zygote or job outlived it")


if __name__ == "__main__":
    unittest.main()
