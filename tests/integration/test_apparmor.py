"""Ubuntu's AppArmor restriction of unprivileged user namespaces
(kernel.apparmor_restrict_unprivileged_userns = 1), faked: this host has no such restriction, so
these tests run pysandbox-injectable (tests/CMakeLists.txt, src/sys/fault_injection.hpp), which
reads a file of the test's instead of the sysctl and can make one set-up step fail with EPERM, as
the restriction makes the first mount fail. What they prove is pysandbox's side: doctor decides
by a real run, and the fixes and the run's error name AppArmor, only for a caller it restricts
(not root). That the profile really grants `userns` takes a real Ubuntu host.

The shipped binary must ignore the same variables: the faults exist in the test binary only."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

from harness import PYSANDBOX, RUN_AS, command_prefix
from test_doctor import check_named, parse_report

INJECTABLE = os.environ.get("PYSANDBOX_INJECTABLE",
                            str(Path(PYSANDBOX).parent / "pysandbox-injectable"))
APPARMOR = "AppArmor user-namespace restriction"
FAILING_STEP = "mount /tmp"  # a mount after clone: where the restriction first shows
SYSCTL_D = ("echo kernel.apparmor_restrict_unprivileged_userns=0 | sudo tee "
            "/etc/sysctl.d/60-pysandbox-userns.conf && sudo sysctl --system")
RESTRICTED = RUN_AS == "nobody"  # the restriction is for callers without CAP_SYS_ADMIN


def profile_command() -> str:
    """The fix's command for the profile: the data dir's copy installed, then loaded."""
    loaded = "/etc/apparmor.d/pysandbox"
    if Path(loaded).exists():
        return f"sudo apparmor_parser -r {loaded}"
    shipped = Path(INJECTABLE).resolve().parent.parent / "share/pysandbox/apparmor/pysandbox"
    return f"sudo install -m644 {shipped} {loaded} && sudo apparmor_parser -r {loaded}"


class FakedRestrictionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = Path(tempfile.mkdtemp(prefix="pysandbox-apparmor-"))
        cls.dir.chmod(0o755)  # nobody reads the fake sysctl
        cls.sysctl = cls.dir / "apparmor_restrict_unprivileged_userns"
        cls.sysctl.write_text("1\n")
        cls.sysctl.chmod(0o644)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def pysandbox(self, *args: str, binary: str = INJECTABLE, restricted: bool = True,
                  failing_step: str | None = None) -> subprocess.CompletedProcess:
        env = dict(os.environ)
        env.pop("PYSANDBOX_FAKE_APPARMOR_SYSCTL", None)
        env.pop("PYSANDBOX_FAKE_EPERM_STEP", None)
        if restricted:
            env["PYSANDBOX_FAKE_APPARMOR_SYSCTL"] = str(self.sysctl)
        if failing_step:
            env["PYSANDBOX_FAKE_EPERM_STEP"] = failing_step
        return subprocess.run(command_prefix() + [binary, *args], capture_output=True,
                              text=True, env=env, timeout=60, cwd=self.dir)

    def test_doctor_under_the_restriction_with_a_working_sandbox_is_ok_with_a_note(self):
        proc = self.pysandbox("doctor", "--json")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        report = parse_report(proc.stdout)
        apparmor = check_named(report, APPARMOR)
        self.assertIs(apparmor["ok"], True, apparmor)
        self.assertIn("kernel.apparmor_restrict_unprivileged_userns = 1", apparmor["detail"])
        if RESTRICTED:
            self.assertIn("restricted by AppArmor, allowed for pysandbox by its AppArmor profile",
                          apparmor["detail"])
        else:
            self.assertIn("does not restrict root", apparmor["detail"])
        # Decided by a real run, which the restriction no longer skips.
        self.assertIs(check_named(report, "end-to-end sandbox")["ok"], True)

    def test_doctor_under_the_restriction_with_a_failing_sandbox_names_both_fixes(self):
        proc = self.pysandbox("doctor", "--json", failing_step=FAILING_STEP)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        report = parse_report(proc.stdout)
        end_to_end = check_named(report, "end-to-end sandbox")
        self.assertIs(end_to_end["ok"], False, end_to_end)
        self.assertIn(FAILING_STEP, end_to_end["detail"])
        apparmor = check_named(report, APPARMOR)
        if RESTRICTED:
            self.assertIs(apparmor["ok"], False, apparmor)
            self.assertIn(profile_command(), apparmor["fix"])
            self.assertIn(SYSCTL_D, apparmor["fix"])
        else:
            # Root is not restricted: the failure is not AppArmor's, and no fix says it is.
            self.assertIs(apparmor["ok"], True, apparmor)
            self.assertNotIn("AppArmor", end_to_end["fix"])
        text = self.pysandbox("doctor", failing_step=FAILING_STEP)
        self.assertEqual(text.returncode, 1)
        self.assertEqual(RESTRICTED, "fix: load pysandbox's AppArmor profile" in text.stdout,
                         text.stdout)

    def test_run_names_apparmor_and_doctor_for_eperm_in_a_setup_step(self):
        proc = self.pysandbox("run", "-c", "print('ran')", failing_step=FAILING_STEP)
        self.assertEqual(proc.returncode, 125, proc.stderr)
        self.assertNotIn("ran", proc.stdout)
        self.assertIn(f'setup failed at step "{FAILING_STEP}"', proc.stderr)
        self.assertIn("Operation not permitted", proc.stderr)
        self.assertEqual(RESTRICTED, "AppArmor restricts unprivileged user namespaces"
                         in proc.stderr, proc.stderr)
        self.assertEqual(RESTRICTED, "`pysandbox doctor`" in proc.stderr, proc.stderr)
        # The JSON result's error says the same, with the step and the errno.
        as_json = self.pysandbox("run", "--json", "-c", "pass", failing_step=FAILING_STEP)
        self.assertEqual(as_json.returncode, 125, as_json.stderr)
        error = json.loads(as_json.stdout)["error"]
        self.assertEqual((error["step"], error["errno"]), (FAILING_STEP, 1))
        self.assertEqual(RESTRICTED, "`pysandbox doctor`" in error["message"], error)

    def test_eperm_without_the_restriction_does_not_blame_apparmor(self):
        proc = self.pysandbox("run", "-c", "pass", restricted=False, failing_step=FAILING_STEP)
        self.assertEqual(proc.returncode, 125, proc.stderr)
        self.assertIn(f'setup failed at step "{FAILING_STEP}"', proc.stderr)
        self.assertNotIn("AppArmor", proc.stderr)

    def test_the_shipped_binary_ignores_the_faults(self):
        run = self.pysandbox("run", "-c", "print('ran')", binary=PYSANDBOX,
                             failing_step=FAILING_STEP)
        self.assertEqual((run.returncode, run.stdout), (0, "ran\n"), run.stderr)
        faked = self.pysandbox("doctor", "--json", binary=PYSANDBOX, failing_step=FAILING_STEP)
        plain = self.pysandbox("doctor", "--json", binary=PYSANDBOX, restricted=False)
        self.assertEqual(faked.returncode, plain.returncode, faked.stdout + faked.stderr)
        self.assertEqual(check_named(parse_report(faked.stdout), APPARMOR),
                         check_named(parse_report(plain.stdout), APPARMOR))


if __name__ == "__main__":
    unittest.main()
