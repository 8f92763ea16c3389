"""`pysandbox doctor --json`: one JSON object on stdout with every check, its result and its fix,
and an overall ok that agrees with the exit status -- what a container's readiness probe and a
script read. Failures are judged with hosts made to refuse: user namespaces switched off in a
namespace of the test's own, and a process limit that stops doctor from starting its probe."""

import json
import os
import shutil
import subprocess
import unittest
from pathlib import Path

from harness import (AS_NOBODY, PYSANDBOX, SandboxTestCase, command_prefix, landlock_abi,
                     run, temp_dir, write_file)

CHECK_FIELDS = ["name", "ok", "required", "detail", "fix"]
GVISOR = 'gVisor (sandbox.kernel = "gvisor")'
MARKS = {"ok  ": True, "FAIL": False, "warn": False}


def parse_report(stdout: bytes) -> dict:
    """The whole of stdout as one JSON object, checked for the documented shape."""
    try:
        report = json.loads(stdout)
    except ValueError:
        raise AssertionError(f"doctor --json did not print one JSON object: {stdout!r}") from None
    assert list(report) == ["schema", "version", "ok", "checks"], list(report)
    assert report["schema"] == "pysandbox.doctor/v1", report["schema"]
    for check in report["checks"]:
        assert list(check) == CHECK_FIELDS, check
        assert isinstance(check["ok"], bool) and isinstance(check["required"], bool), check
        assert isinstance(check["detail"], str) and check["detail"], check
        if check["ok"]:
            assert check["fix"] is None, check
        else:
            assert isinstance(check["fix"], str) and check["fix"], check
    names = [check["name"] for check in report["checks"]]
    assert len(names) == len(set(names)), names
    assert report["ok"] == all(c["ok"] or not c["required"] for c in report["checks"]), report
    return report


def check_named(report: dict, name: str) -> dict:
    found = [check for check in report["checks"] if check["name"] == name]
    assert len(found) == 1, f"no check {name!r} in {report}"
    return found[0]


def doctor_with_user_namespaces_off(*args: str) -> subprocess.CompletedProcess:
    """doctor in a user namespace of its own whose user.max_user_namespaces is 0."""
    unshare = shutil.which("unshare")
    assert unshare, "util-linux unshare is needed for this test"
    inner = ("echo 0 > /proc/sys/user/max_user_namespaces && exec " + PYSANDBOX +
             " doctor " + " ".join(args))
    return subprocess.run(command_prefix() + [unshare, "-U", "-r", "--fork", "sh", "-c", inner],
                          capture_output=True, timeout=60)


class DoctorJsonTest(SandboxTestCase):
    def test_one_object_with_every_check_its_result_and_fix(self):
        r = run(["doctor", "--json"], timeout=60)
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertEqual(r.stderr, b"")
        report = parse_report(r.stdout)
        self.assertIs(report["ok"], True)
        names = [check["name"] for check in report["checks"]]
        for name in ("user namespaces", "seccomp user notification", "Landlock",
                     "cgroup v2 delegation", "interpreter", "end-to-end sandbox"):
            self.assertIn(name, names)
        end_to_end = check_named(report, "end-to-end sandbox")
        self.assertIs(end_to_end["ok"], True, end_to_end)
        self.assertIn("python ran in the sandbox", end_to_end["detail"])
        self.assertIs(check_named(report, "Landlock")["required"], False)

    def test_landlock_names_what_this_kernel_lets_a_run_handle(self):
        abi = landlock_abi()
        self.assertGreaterEqual(abi, 6, "this host's kernel has Landlock's scopes")
        r = run(["doctor", "--json"], timeout=60)
        detail = check_named(parse_report(r.stdout), "Landlock")["detail"]
        self.assertEqual(detail, f"ABI {abi}: fs, ioctl_dev, tcp (--net none, proxy), scopes")
        # -v says what this run's ruleset handled: under loopback, not TCP.
        for net, rights in (("none", "fs, ioctl_dev, tcp, scopes"),
                            ("loopback", "fs, ioctl_dev, scopes")):
            with self.subTest(net=net):
                v = run(["run", "-v", "--net", net, "-c", "pass"], timeout=60)
                self.assertEqual(v.returncode, 0, v.describe())
                self.assertIn(f"landlock: ABI {abi} ({rights})", v.stderr.decode(), v.describe())

    def test_json_and_text_give_the_same_verdicts(self):
        text = run(["doctor"], timeout=60)
        json_run = run(["doctor", "--json"], timeout=60)
        self.assertEqual(text.returncode, json_run.returncode)
        verdicts = {}
        for line in text.stdout.decode().splitlines():
            if line[:4] in MARKS and line[4:6] == "  ":
                name = line[6:].split(": ", 1)[0]
                verdicts[name] = MARKS[line[:4]]
        report = parse_report(json_run.stdout)
        self.assertEqual(verdicts, {c["name"]: c["ok"] for c in report["checks"]})

    def test_refused_user_namespaces_fail_with_the_fix(self):
        proc = doctor_with_user_namespaces_off("--json")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        report = parse_report(proc.stdout)
        self.assertIs(report["ok"], False)
        userns = check_named(report, "user namespaces")
        self.assertEqual((userns["ok"], userns["required"]), (False, True))
        self.assertIn("unshare(CLONE_NEWUSER)", userns["detail"])
        # Set for good, not until the next boot.
        self.assertEqual(userns["fix"], "echo user.max_user_namespaces=15000 | sudo tee "
                         "/etc/sysctl.d/60-pysandbox-userns.conf && sudo sysctl --system")
        # Nothing is tried end to end on a host that failed a required check.
        self.assertNotIn("end-to-end sandbox", [c["name"] for c in report["checks"]])

    def test_a_probe_it_cannot_start_is_a_failure_not_a_pass(self):
        # RLIMIT_NPROC of 1 for uid 65534 (root is exempt, so always as nobody): doctor's own
        # fork fails. Its user-namespace check must then fail, naming fork, never pass unseen.
        prlimit = shutil.which("prlimit")
        self.assertIsNotNone(prlimit, "util-linux prlimit is needed for this test")
        # LeakSanitizer needs a thread of its own at exit, which RLIMIT_NPROC 1 refuses: in a
        # sanitizer build it is off for this one process (the rest of the suite checks leaks).
        env = dict(os.environ)
        if env.get("PYSANDBOX_SANITIZED"):
            env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
        proc = subprocess.run(AS_NOBODY + [prlimit, "--nproc=1", "--", PYSANDBOX, "doctor",
                                           "--json"], capture_output=True, timeout=60, env=env)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        report = parse_report(proc.stdout)
        self.assertIs(report["ok"], False)
        userns = check_named(report, "user namespaces")
        self.assertIs(userns["ok"], False, userns)
        self.assertIn("fork", userns["detail"])


def path_with(directory: Path | None = None) -> dict[str, str]:
    """The environment with a PATH of ``directory`` (if any) and setpriv (how the suite runs as
    nobody) alone: the runsc doctor finds is the one on the caller's PATH, as for a run."""
    tools = temp_dir()
    os.symlink("/usr/bin/setpriv", tools / "setpriv")
    return {**os.environ, "PATH": f"{directory}:{tools}" if directory else str(tools)}


class DoctorGvisorTest(SandboxTestCase):
    def gvisor_check(self, *args: str, env: dict[str, str] | None = None,
                     status: int = 0) -> dict:
        r = run(["doctor", "--json", *args], timeout=60, env=env)
        self.assertEqual(r.returncode, status, r.describe())
        report = parse_report(r.stdout)
        self.assertIs(report["ok"], status == 0)
        return check_named(report, GVISOR)

    def test_it_says_which_platform_works_and_is_optional_unless_asked_for(self):
        for args, required in (((), False), (("--kernel", "gvisor"), True)):
            with self.subTest(args=args):
                check = self.gvisor_check(*args)
                self.assertEqual((check["ok"], check["required"]), (True, required), check)
                self.assertRegex(check["detail"], r"^platform ptrace works: python ran on gVisor "
                                 r"\(/usr/bin/runsc\) in \d+ ms; kvm: ")

    def test_a_runsc_that_fails_gives_its_message_and_the_fix(self):
        # A runsc on the caller's PATH (where only root and the caller may change it: it would be
        # refused otherwise) that fails as a broken one does: a warning, or with --kernel gvisor
        # a failed required check and status 1, as any other.
        fake = temp_dir(parent="/var/tmp")  # under /tmp the sandbox's own would hide it
        write_file(fake / "runsc", "#!/bin/sh\necho 'fake runsc: no platform works' >&2\n"
                   "exit 1\n", 0o755)
        for args, status in (((), 0), (("--kernel", "gvisor"), 1)):
            with self.subTest(args=args):
                check = self.gvisor_check(*args, env=path_with(fake), status=status)
                self.assertEqual((check["ok"], check["required"]), (False, status == 1), check)
                self.assertIn(f"platform ptrace fails with {fake}/runsc", check["detail"])
                self.assertIn("(runsc: fake runsc: no platform works)", check["detail"])
                self.assertIn("pysandbox run --kernel gvisor -c pass", check["fix"])

    def test_no_runsc_gives_how_to_install_it(self):
        check = self.gvisor_check("--kernel", "gvisor", env=path_with(), status=1)
        self.assertIn("runsc (gVisor) not found on PATH", check["detail"])
        self.assertIn("apt-get install runsc", check["fix"])

    def test_asked_for_it_fails_visibly_where_the_sandbox_cannot_run(self):
        # No user namespaces: nothing runs, gVisor included, and the required check says so
        # rather than going missing.
        proc = doctor_with_user_namespaces_off("--json", "--kernel", "gvisor")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        check = check_named(parse_report(proc.stdout), GVISOR)
        self.assertEqual((check["ok"], check["required"]), (False, True), check)
        self.assertIn("not tried", check["detail"])


if __name__ == "__main__":
    unittest.main()
