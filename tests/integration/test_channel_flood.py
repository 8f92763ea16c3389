"""One sandbox cannot spoil another's result: a job that floods the driver's channel (fd 5) with
large messages costs the supervisor next to nothing, so jobs next to it that answer inside their
timeout are `ok`, through `batch -j 2` (cloned and forked) and `mcp`; the flooding job's own
result says what it did (a "channel" violation).

The flooder is the strongest the channel allows: it reads its cell's token from the driver's
frame, so its messages carry the head the supervisor waits for, and it sends 30 MiB ones that
are not JSON (parsed in vain) between as many with another token (valid JSON).

Judged from the host: each job's status and violations, as pysandbox reports them.
"""

import json
import subprocess
import time
import unittest

from harness import (PYSANDBOX, TIME_SLACK_SCALE, SandboxTestCase, command_prefix, jobs_file,
                     marked_profile, preload_marker, result_schema, wait_for_no_leftovers)

FLOOD = r'''
import os, sys
frame, token = sys._getframe(), None
while frame is not None and token is None:
    message = frame.f_locals.get("message")
    if isinstance(message, dict) and isinstance(message.get("token"), str):
        token = message["token"]
    frame = frame.f_back
payload = 65536 - 9
def send(text):
    count = (len(text) + payload - 1) // payload
    for i in range(count):
        os.write(5, (b"." if i == count - 1 else b"+") + b"%08x" % i +
                 text[i * payload:(i + 1) * payload])
filler = b"a" * (30 * 1024 * 1024)
broken = b'{"kind":"done","token":"' + token.encode() + b'","x":"' + filler
other = b'{"kind":"done","token":"0123","x":"' + filler + b'"}'
while True:
    send(broken)
    send(other)
'''

VICTIMS = 6
# Each answers at 0.9 of its timeout: 0.3 s to spare, for the driver to be woken, read its cell
# and answer on a loaded CI machine (at 1.5 s, 0.15 s to spare was once not enough there).
TIMEOUT_S = 3.0
ON_TIME = f"import time\ntime.sleep({0.9 * TIMEOUT_S})\n'on time'"


def channel_violations(result) -> list[tuple[str, str]]:
    return [(v["what"], v["action"]) for v in result["violations"] if v["kind"] == "channel"]


class ChannelFloodTest(SandboxTestCase):
    def test_a_flooding_batch_job_delays_no_other(self):
        for mode, options in {"cloned": [], "forked": ["--fork"]}.items():
            with self.subTest(mode):
                marker = preload_marker()
                # The flooder holds one slot while the others run one after another in the other.
                jobs = [{"id": "flood", "code": FLOOD, "timeout": f"{VICTIMS * TIMEOUT_S}s"},
                        *({"id": f"victim-{n}", "code": ON_TIME, "timeout": f"{TIMEOUT_S}s"}
                          for n in range(VICTIMS))]
                r = subprocess.run(
                    command_prefix() + [PYSANDBOX, "batch", *options, "-j", "2", "-p",
                                        str(marked_profile(marker)), str(jobs_file(jobs))],
                    capture_output=True, timeout=120)
                self.assertEqual(r.returncode, 0, r.stderr)
                results = {x["id"]: x for x in map(json.loads, r.stdout.splitlines())}
                for result in results.values():
                    result_schema.validate(result)
                self.assertEqual(
                    {id: (x["status"], x["value"]) for id, x in results.items() if id != "flood"},
                    {f"victim-{n}": ("ok", "'on time'") for n in range(VICTIMS)})
                flood = results["flood"]
                self.assertEqual(channel_violations(flood), [("driver_channel", "dropped")],
                                 flood["violations"])
                self.assertEqual(flood["status"], "timeout")
                self.assertEqual(wait_for_no_leftovers(marker, 5.0), [])

    def test_a_flooding_mcp_call_delays_no_other(self):
        marker = preload_marker()
        profile = marked_profile(marker, extra='[limits]\nwall_time = "60s"')
        server = subprocess.Popen(command_prefix() + [PYSANDBOX, "mcp", "-p", str(profile)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)

        def send(request_id, method, params):
            server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                                           "params": params}).encode() + b"\n")
            server.stdin.flush()

        def call(request_id, code, timeout):
            send(request_id, "tools/call", {"name": "run_python",
                                            "arguments": {"code": code, "timeout": timeout}})

        def answer():
            line = server.stdout.readline()
            self.assertTrue(line, "the server closed its stdout")
            return json.loads(line)

        try:
            send(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                   "clientInfo": {"name": "test", "version": "1"}})
            answer()
            calls = 3
            # Long enough that the flood outlasts the calls however slowly sandboxes start.
            call("flood", FLOOD, (calls + 2) * TIMEOUT_S)
            for n in range(calls):  # one after another, while the flood goes on
                started = time.monotonic()
                call(n, ON_TIME, TIMEOUT_S)
                got = answer()
                if got["id"] == "flood":
                    self.fail(f"the flood ended before call {n}: {got}")
                elapsed = time.monotonic() - started
                result = got["result"]["structuredContent"]
                self.assertEqual((result["status"], result["value"]), ("ok", "'on time'"), got)
                self.assertLess(elapsed, TIMEOUT_S + 1.0 * TIME_SLACK_SCALE, got)
            flood = answer()["result"]["structuredContent"]
            self.assertEqual(channel_violations(flood), [("driver_channel", "dropped")],
                             flood["violations"])
        finally:
            server.communicate(timeout=30)  # closes its stdin: the server ends
        self.assertEqual(server.returncode, 0)
        self.assertEqual(wait_for_no_leftovers(marker, 5.0), [])


if __name__ == "__main__":
    unittest.main()
