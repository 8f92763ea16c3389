"""The [policy] layer holds in forked jobs (`pysandbox batch --fork`): for each import and call
the strict profile denies, a job forked by a zygote gets the same answer as the same job cloned
(`pysandbox batch`): the same status, violations, exception and output, and the same incident
log lines.

A zygote imports before it forks (the driver, the preload, its own helper): a module it imported
while no hook was there would be in every job's sys.modules, where Python raises no import event
for it, so the job could use it unseen (ctypes, which the helper was loaded with, did: status ok,
no violation, no incident). Judged from the host: the result lines the supervisor writes (the
violations are the records it drained from the policy channel) and the incident log it appends.
"""

import json
import unittest

from harness import (SandboxTestCase, jobs_file, marked_profile, preload_marker, profile,
                     require_modules, run, temp_dir, wait_for_no_leftovers)

# Each a job of its own, by what it tries. Every one is denied under strict (policy.deny_imports
# or policy.deny_calls), whether or not the script catches the refusal.
DENIED = {
    "import_ctypes": "import ctypes\nprint(ctypes.sizeof(ctypes.c_int))\n",
    "import_ctypes_util": "import ctypes.util\n",
    "from_ctypes": "from ctypes import c_int\n",
    "dunder_import_ctypes": "__import__('ctypes')\n",
    "import_ctypes_caught": "try:\n    import ctypes\nexcept PermissionError:\n    print('no')\n",
    "import_subprocess": "import subprocess\n",
    "import_multiprocessing": "import multiprocessing\n",
    "import_multiprocessing_pool": "import multiprocessing.pool\n",
    "import_socket": "import socket\n",
    "import_posixsubprocess": "import _posixsubprocess\n",
    "os_system": "import os\nos.system('true')\n",
    "os_exec": "import os\nos.execv('/bin/true', ['true'])\n",
    "os_posix_spawn": "import os\nos.posix_spawn('/bin/true', ['true'], {})\n",
    "os_fork": "import os\nos.fork()\n",
    "os_forkpty": "import os\nos.forkpty()\n",
    "os_kill": "import os\nos.kill(os.getpid(), 0)\n",
    "os_killpg": "import os\nos.killpg(os.getpgid(0), 0)\n",
    "ctypes_dlopen": "import _ctypes\n_ctypes.dlopen('libc.so.6')\n",
    "open_write_outside_tmp": "open('/sandbox-policy-fork', 'w')\n",
    "open_write_caught": "try:\n    open('/x', 'w')\nexcept PermissionError:\n    print('no')\n",
}

# What decides a job's answer; the rest (timings, usage) differs from run to run.
COMPARED = ("status", "exit_code", "signal", "message", "stdout", "stderr", "exception",
            "violations", "error", "warnings")


def answer(result):
    answered = {key: result[key] for key in COMPARED}
    answered["audit_hook"] = result["enforcement"]["audit_hook"]
    return answered


def incident(line):
    entry = json.loads(line)
    del entry["time"]
    return entry


class PolicyForkTest(SandboxTestCase):
    def setUp(self):
        super().setUp()
        # One profile for both batches (its name is in the policy's messages), its preload the
        # marker every sandbox and zygote carries.
        self.preload_marker = preload_marker()
        self.profile = marked_profile(self.preload_marker, "strict")

    def batch(self, jobs, fork, profile=None):
        """The result lines by id, and the incident log's entries, of one batch of `jobs`."""
        log = temp_dir(0o777) / "incidents.jsonl"
        options = ["--fork"] if fork else []
        r = run(["batch", *options, "-j", "2", "--keep-order", "-p", str(profile or self.profile),
                 "--incident-log", str(log), str(jobs_file(jobs))], timeout=120)
        self.assertEqual(r.returncode, 0, r.describe())
        results = {}
        for line in r.stdout.decode().splitlines():
            result = json.loads(line)
            results[result["id"]] = result
        self.assertEqual(sorted(results), sorted(job["id"] for job in jobs), r.describe())
        self.assertEqual(wait_for_no_leftovers(self.preload_marker, 5.0), [],
                         "a sandbox outlived the batch")
        lines = log.read_text().splitlines() if log.exists() else []
        return results, sorted(map(incident, lines), key=lambda e: e["script_sha256"])

    def test_forked_jobs_answer_as_cloned_ones(self):
        jobs = [{"id": name, "code": code} for name, code in DENIED.items()]
        cloned, cloned_incidents = self.batch(jobs, fork=False)
        forked, forked_incidents = self.batch(jobs, fork=True)
        for name in DENIED:
            with self.subTest(name):
                # The cloned job is the reference: the policy denied what it tried (a script that
                # catches the refusal and goes on ends ok, its violation reported all the same).
                self.assertTrue(cloned[name]["violations"], cloned[name])
                if not name.endswith("_caught"):
                    self.assertEqual(cloned[name]["status"], "policy_violation", cloned[name])
                self.assertEqual(answer(forked[name]), answer(cloned[name]))
        self.assertEqual(len(cloned_incidents), len(DENIED), cloned_incidents)
        self.assertEqual(forked_incidents, cloned_incidents)

    def test_the_zygote_leaves_no_module_of_its_own_in_a_job(self):
        # What a job finds imported is what a cloned one finds: the zygote's own modules (its
        # helper, gc, json, ctypes) are not there for a job to use without an import event.
        code = "import sys\nprint(sorted(sys.modules))\n"
        jobs = [{"id": "modules", "code": code}]
        cloned, _ = self.batch(jobs, fork=False)
        forked, _ = self.batch(jobs, fork=True)
        self.assertEqual(cloned["modules"]["status"], "ok", cloned["modules"])
        self.assertEqual(forked["modules"]["status"], "ok", forked["modules"])
        self.assertEqual(forked["modules"]["stdout"], cloned["modules"]["stdout"])

    def test_a_preload_the_policy_denies_answers_as_in_a_cloned_job(self):
        # The preload is imported under the hook, in the zygote as in a cloned sandbox's driver:
        # its own `ctypes` is refused (a warning, and a violation in every job), numpy's is a
        # package's (allowed, and then in sys.modules for the script, in both).
        require_modules("numpy")
        preloading = profile(f'extends = "strict"\n[python]\npreload = '
                             f'["{self.preload_marker}", "ctypes", "numpy"]\n',
                             name=f"{self.preload_marker}.toml")
        jobs = [{"id": "import_ctypes", "code": DENIED["import_ctypes"]},
                {"id": "numpy", "code": "import numpy\nprint(numpy.arange(3).sum())\n"},
                {"id": "os_system", "code": DENIED["os_system"]}]
        cloned, cloned_incidents = self.batch(jobs, fork=False, profile=preloading)
        forked, forked_incidents = self.batch(jobs, fork=True, profile=preloading)
        for job in jobs:
            with self.subTest(job["id"]):
                self.assertIn({"kind": "import", "what": "ctypes", "count": 1,
                               "action": "denied"}, cloned[job["id"]]["violations"])
                self.assertEqual(answer(forked[job["id"]]), answer(cloned[job["id"]]))
        self.assertEqual(forked_incidents, cloned_incidents)


if __name__ == "__main__":
    unittest.main()
