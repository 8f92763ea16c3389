"""Every front that holds sandboxes ends on the same signals, the same way: SIGINT, SIGTERM, SIGHUP
and SIGQUIT to `pysandbox batch` (cloned and forked) and `pysandbox mcp` while a job or call is
running end them with 128 + the signal, kill every sandbox they hold, and leave nothing of theirs
behind (the MCP server's scratch directory included). `run` and `session` forward or answer the
same four (test_supervision, test_session). A batch --fork whose zygote is still starting (its
preload still importing) ends on them as promptly, without a result for the job that waited.

Judged from the host: the front's exit status, no live process carrying the run's marker (a
[python] preload module that does not exist, on the command line of every sandbox, zygote and
job) and the MCP server's TMPDIR left empty.
"""

import json
import os
import signal
import subprocess
import unittest

from harness import (PYSANDBOX, SandboxTestCase, command_prefix, jobs_file, leftovers,
                     marked_profile, preload_marker, preload_module_profile, settle, temp_dir,
                     wait_for_no_leftovers)

WAIT_FOREVER = ("import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
                "signal.sigwait({signal.SIGUSR1})")
SIGNALS = (signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
# A preload that never finishes importing: the zygote that imports it is never ready. It says it
# began in its own /tmp, which the host reads through /proc/PID/root.
NEVER_READY = "import time\nopen('/tmp/preloading', 'w').close()\ntime.sleep(3600)\n"
# How long a front may take to end on a signal (it acts on it in its next round): far less than
# the 60 s a zygote is given to start.
PROMPTLY = 10.0


def _stop(proc: subprocess.Popen, sig: int) -> bytes:
    try:
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        return err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


class FrontSignalTest(SandboxTestCase):
    def assert_ended(self, proc: subprocess.Popen, sig: int, marker: str, err: bytes) -> None:
        self.assertEqual(proc.returncode, 128 + sig, err)
        self.assertEqual(wait_for_no_leftovers(marker, 5.0), [],
                         f"a sandbox outlived {signal.Signals(sig).name}")

    def test_a_signal_ends_a_batch_and_its_sandboxes(self):
        for options in ([], ["--fork"]):
            for sig in SIGNALS:
                with self.subTest(fork=bool(options), signal=signal.Signals(sig).name):
                    marker = preload_marker()
                    marked = marked_profile(marker, extra='[limits]\nwall_time = "60s"')
                    jobs = [{"id": "quick", "code": "print(1)"},
                            *({"id": f"stuck-{n}", "code": WAIT_FOREVER} for n in range(3))]
                    batch = subprocess.Popen(
                        command_prefix() + [PYSANDBOX, "batch", *options, "-j", "2", "-p",
                                            str(marked), str(jobs_file(jobs))],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                    try:
                        # The quick job is done: two stuck ones hold both slots.
                        self.assertEqual(json.loads(batch.stdout.readline())["id"], "quick")
                    finally:
                        err = _stop(batch, sig)
                    self.assert_ended(batch, sig, marker, err)

    def test_a_signal_ends_a_batch_whose_zygote_is_starting(self):
        for sig in SIGNALS:
            with self.subTest(signal=signal.Signals(sig).name):
                marker = preload_marker()
                marked = preload_module_profile(marker, NEVER_READY)
                batch = subprocess.Popen(
                    command_prefix() + [PYSANDBOX, "batch", "--fork", "-j", "2", "-p", str(marked),
                                        str(jobs_file([{"id": "waits", "code": "print(1)"}]))],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                try:
                    not_yet = settle(lambda: not preloading(marker), 30)
                    self.assertFalse(not_yet, "the zygote did not begin to import its preload")
                    batch.send_signal(sig)
                    try:
                        out, err = batch.communicate(timeout=PROMPTLY)
                    except subprocess.TimeoutExpired:
                        self.fail(f"{signal.Signals(sig).name} did not end the batch within "
                                  f"{PROMPTLY} s while its zygote was starting")
                finally:
                    if batch.poll() is None:
                        batch.kill()
                        batch.wait()
                self.assertEqual(out, b"", "a result for the job that waited for the zygote")
                self.assert_ended(batch, sig, marker, err)

    def test_a_signal_ends_an_mcp_server_its_sessions_and_calls(self):
        for sig in SIGNALS:
            with self.subTest(signal=signal.Signals(sig).name):
                marker = preload_marker()
                marked = marked_profile(marker, extra='[limits]\nwall_time = "60s"')
                scratch = temp_dir(0o777)
                server = subprocess.Popen(
                    command_prefix() + [PYSANDBOX, "mcp", "-p", str(marked)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    env={**os.environ, "TMPDIR": str(scratch)})
                try:
                    self.start_session_and_call(server)
                finally:
                    err = _stop(server, sig)
                self.assert_ended(server, sig, marker, err)
                self.assertEqual(os.listdir(scratch), [], "the server's scratch directory stayed")

    def start_session_and_call(self, server: subprocess.Popen) -> None:
        def call(message: dict) -> None:
            server.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
            server.stdin.flush()

        def answer() -> dict:
            return json.loads(server.stdout.readline())

        call({"id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}})
        self.assertEqual(answer()["id"], 1)
        call({"method": "notifications/initialized"})
        call({"id": 2, "method": "tools/call",
              "params": {"name": "start_session", "arguments": {}}})
        session_id = answer()["result"]["structuredContent"]["session_id"]
        # One call in the session, one in a sandbox of its own. The server starts the calls it read
        # before it writes what it answered in that round: once the ping is answered, both run.
        call({"id": 3, "method": "tools/call",
              "params": {"name": "run_python",
                         "arguments": {"code": WAIT_FOREVER, "session_id": session_id}}})
        call({"id": 4, "method": "tools/call",
              "params": {"name": "run_python", "arguments": {"code": WAIT_FOREVER}}})
        call({"id": 5, "method": "ping"})
        self.assertEqual(answer()["id"], 5)


def preloading(marker: str) -> list[int]:
    """The zygote's processes (their command lines carry the marker, its preload) once its
    preload began to import (NEVER_READY)."""
    return [pid for pid in leftovers(marker)
            if os.path.exists(f"/proc/{pid}/root/tmp/preloading")]


if __name__ == "__main__":
    unittest.main()
