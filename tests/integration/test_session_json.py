"""`pysandbox session`: every line it prints is a pysandbox.result/v1 object, valid under
schema/pysandbox.result.v1.json (harness.run checks each line, tests/support/result_schema.py) — a
cell that ran, whatever its status, and a request line it could not run (bad_request) — one
line a request, in the order of the requests. What each line says is judged against what the
cell did.
"""

import json
import unittest

from harness import SandboxTestCase, run

BAD_REQUEST_FIELDS = {"schema", "version", "id", "status", "message"}


def ndjson(*requests) -> bytes:
    """One line a request; a str is sent as it is (a line that is no JSON request)."""
    return b"".join((r if isinstance(r, str) else json.dumps(r)).encode() + b"\n"
                    for r in requests)


class SessionLinesTest(SandboxTestCase):
    def session(self, *requests, options=()):
        """Run the requests through one session; the lines it printed, each a valid result."""
        r = run(["session", *options], input=ndjson(*requests), timeout=60)
        self.assertEqual(r.returncode, 0, r.describe())
        lines = r.lines()
        self.assertEqual(len(lines), len(requests), r.describe())
        return lines

    def test_ok_exception_timeout_and_bad_requests_are_each_a_valid_line(self):
        ok, exc, slow, not_json, no_code, unknown, after = self.session(
            {"id": "ok", "code": "x = 6 * 7\nx"},
            {"id": 2, "code": "1 / 0"},
            {"id": ["slow"], "code": "while True: pass", "timeout": "1s"},
            "this line is not JSON",
            {"id": "no-code"},
            {"id": {"n": 6}, "code": "x", "language": "python"},
            {"id": None, "code": "print(x)"},
        )
        self.assertEqual((ok["id"], ok["status"], ok["value"], ok["cell"], ok["sandbox"],
                          ok["state"], ok["exit_code"]), ("ok", "ok", "42", 1, 1, "kept", 0), ok)
        self.assertEqual((exc["id"], exc["status"], exc["exception"]["type"], exc["cell"],
                          exc["state"]), (2, "exception", "ZeroDivisionError", 2, "kept"), exc)

        # The timeout interrupts the loop (KeyboardInterrupt), and the sandbox goes on.
        self.assertEqual((slow["id"], slow["status"], slow["state"], slow["sandbox"],
                          slow["pysandbox_exit_code"]), (["slow"], "timeout", "kept", 1, 124), slow)
        self.assertEqual(slow["limits"]["wall_time_ms"], 1000, "limits carry the cell's timeout")
        self.assertIn({"kind": "resource", "what": "wall_time", "count": 1,
                       "action": "interrupted"}, slow["violations"])

        for line, request_id in [(not_json, None), (no_code, "no-code"), (unknown, {"n": 6})]:
            self.assertEqual(set(line), BAD_REQUEST_FIELDS, line)
            self.assertEqual((line["status"], line["id"]), ("bad_request", request_id), line)
        self.assertIn("language", unknown["message"])

        # Bad requests are not cells: the next cell is the fourth, in the same interpreter.
        self.assertEqual((after["id"], after["status"], after["stdout"], after["cell"],
                          after["sandbox"]), (None, "ok", "42\n", 4, 1), after)

    def test_a_cell_that_outlives_its_interrupt_loses_the_state_in_a_valid_line(self):
        keep, stuck, fresh = self.session(
            # The first cell ignores SIGINT (a cell's handler is kept for the next ones): set
            # in the stuck cell itself, a slow machine could interrupt it before it was set.
            {"id": 1, "code": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nx = 1"},
            {"id": 2, "timeout": "1s", "code": "import time\nwhile True: time.sleep(0.01)"},
            {"id": 3, "code": "x"},
        )
        self.assertEqual((keep["status"], keep["state"]), ("ok", "kept"), keep)
        self.assertEqual((stuck["status"], stuck["state"], stuck["sandbox"]),
                         ("timeout", "lost", 1), stuck)
        self.assertIn({"kind": "resource", "what": "wall_time", "count": 1, "action": "killed"},
                      stuck["violations"])
        # A new sandbox, without x.
        self.assertEqual((fresh["status"], fresh["exception"]["type"], fresh["sandbox"]),
                         ("exception", "NameError", 2), fresh)


if __name__ == "__main__":
    unittest.main()
