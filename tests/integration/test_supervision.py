"""The supervisor's death is the sandbox's death: SIGKILL to pysandbox, at any moment, leaves
no process of the run behind, judged from the host's /proc."""

import signal
import subprocess
import time
import unittest

from harness import Running, SandboxTestCase, leftovers, script, wait_for_no_leftovers

SLEEPER = "import sys, time\nprint('ready', flush=True)\ntime.sleep(60)\n"


class SupervisorDeathTest(SandboxTestCase):
    def test_sigkill_to_pysandbox_ends_the_sandbox_within_100ms(self):
        probe = script(SLEEPER)
        with Running(["run", "--timeout", "30s", str(probe), "--", self.marker],
                     marker=self.marker) as run:
            sandboxed = run.pid
            self.assertIn(sandboxed, leftovers(self.marker))
            start = time.monotonic()
            run.proc.send_signal(signal.SIGKILL)
            run.proc.wait()
            survivors = wait_for_no_leftovers(self.marker, grace=0.1)
            elapsed = time.monotonic() - start
            self.assertEqual(survivors, [], f"still alive {elapsed * 1000:.0f} ms after SIGKILL")

    def test_sigkill_during_setup_leaves_nothing(self):
        probe = script(SLEEPER)
        for delay in (0.0, 0.002, 0.005, 0.01, 0.02):
            proc = subprocess.Popen(self.command(probe), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            time.sleep(delay)
            proc.kill()
            proc.wait()
            self.assertEqual(wait_for_no_leftovers(self.marker, grace=1.0), [],
                             f"a process outlived a SIGKILL {delay * 1000:.0f} ms into the run")

    def command(self, probe):
        from harness import PYSANDBOX, command_prefix
        return command_prefix() + [PYSANDBOX, "run", "--timeout", "30s", str(probe), "--",
                                   self.marker]


if __name__ == "__main__":
    unittest.main()
