"""`pysandbox session` with "stream": true: a cell's output as event lines while it runs.

Driven as a client would (tests/integration/test_session.py's Session: select on its stdout, no
sleeps here). Every event line must be valid under schema/pysandbox.session-event.v1.json and
carry its request's id; the events of a cell come before its result and, joined per stream, are
exactly the result's stdout and stderr, in the order the result's "output" gives; a request
without "stream" gets its result line and nothing else.
"""

import base64
import json
import time
import unittest

from harness import result_schema
from test_session import ANSWER, Session, SessionTestCase


def merged(events: list[dict]) -> list[list]:
    """The events' streams and lengths in bytes, adjacent ones of a stream together: the shape
    of a result's "output"."""
    order: list[list] = []
    for event in events:
        size = len(data_of(event))
        if order and order[-1][0] == event["event"]:
            order[-1][1] += size
        else:
            order.append([event["event"], size])
    return order


def data_of(event: dict) -> bytes:
    if event.get("encoding") == "base64":
        return base64.b64decode(event["data"])
    return event["data"].encode()


def joined(events: list[dict], stream: str) -> bytes:
    return b"".join(data_of(e) for e in events if e["event"] == stream)


class StreamingSession(Session):
    def events_then_result(self, timeout: float = ANSWER) -> tuple[list[tuple[float, dict]], dict]:
        """The event lines of the oldest unanswered request, each with when it was read, then its
        result. An event for any other id, or one after the result, fails the test."""
        expected = self.unanswered[0]
        self.watch.note()  # the sandboxes, for the check that none is left (Session.response)
        events = []
        while True:
            line = self.read_line(timeout)
            if line is None:
                raise AssertionError(f"the session ended with {self.unanswered} unanswered")
            now = time.monotonic()
            obj = json.loads(line)
            if "event" not in obj:
                self.watch.note()
                return events, self.check(line)
            result_schema.validate_event(obj)
            if obj["id"] != expected:
                raise AssertionError(f"an event for id {obj['id']!r}, expected {expected!r}")
            events.append((now, obj))


class StreamTest(SessionTestCase):
    def session(self, *options: str) -> StreamingSession:
        session = StreamingSession(*options)
        self.addCleanup(self.check_ended, session)
        return session

    def test_events_come_in_order_with_the_request_id_and_join_to_the_result(self):
        s = self.session()
        s.submit("import sys\nfor i in range(5):\n    print('out', i, flush=True)\n"
                 "    print('err', i, file=sys.stderr, flush=True)\n'done'",
                 id={"cell": [7]}, stream=True)
        timed, result = s.events_then_result()
        self.assertStatus(result, "ok")
        events = [event for _, event in timed]
        self.assertTrue(events, "no event before the result")
        self.assertEqual(joined(events, "stdout"), result["stdout"].encode())
        self.assertEqual(joined(events, "stderr"), result["stderr"].encode())
        self.assertEqual(merged(events), result["output"], "the order the output arrived in")
        self.assertIn(b"out 4\n", joined(events, "stdout"))
        self.assertEqual(result["value"], "'done'", "the value is in the result only")

    def test_without_stream_or_with_false_only_the_result_comes(self):
        s = self.session()
        for fields in ({}, {"stream": False}):
            s.submit("print('quiet', flush=True)", **fields)
            events, result = s.events_then_result()
            self.assertEqual(events, [], fields)
            self.assertEqual(result["stdout"], "quiet\n")

    def test_a_flushed_line_arrives_while_the_cell_still_runs(self):
        s = self.session()
        s.cell("import time")  # the sandbox is up and the module imported
        s.submit("print('first', flush=True)\ntime.sleep(2)\nprint('second')", stream=True)
        sent = time.monotonic()
        timed, result = s.events_then_result()
        self.assertStatus(result, "ok")
        result_at = time.monotonic()
        first_at, first = timed[0]
        self.assertEqual((first["event"], first["data"]), ("stdout", "first\n"))
        self.assertGreater(result_at - first_at, 1.5,
                           "the flushed line must come as it is printed, not with the result")
        self.assertLess(first_at - sent, 1.0, "the first event took too long")
        self.assertEqual(joined([e for _, e in timed], "stdout"), b"first\nsecond\n")

    def test_events_are_bounded_by_the_output_limit_as_the_result_is(self):
        s = self.session("--output-limit", "4KiB")
        s.submit("import sys\nfor i in range(2000):\n    print('x' * 60, flush=i % 100 == 0)\n"
                 "print('tail end', file=sys.stderr)", stream=True)
        timed, result = s.events_then_result()
        self.assertStatus(result, "output_limit")
        events = [event for _, event in timed]
        streamed = joined(events, "stdout")
        self.assertEqual(streamed, result["stdout"].encode(), "head, marker and tail, as the result")
        self.assertTrue(result["truncated"]["stdout"])
        self.assertIn(b"bytes omitted", streamed)
        self.assertLessEqual(sum(len(data_of(e)) for e in events), 4096 + 2 * 64,
                             "the limit's head and tails, and their markers")
        self.assertEqual(joined(events, "stderr"), result["stderr"].encode())

    def test_bytes_that_are_not_text_come_as_base64_and_a_split_character_is_kept_whole(self):
        s = self.session()
        s.submit("import sys, time\nsys.stdout.buffer.write(b'\\xff\\xfe\\x00'); sys.stdout.flush()",
                 stream=True)
        timed, result = s.events_then_result()
        events = [event for _, event in timed]
        self.assertTrue(events)
        self.assertTrue(all(e.get("encoding") == "base64" for e in events), events)
        self.assertEqual(joined(events, "stdout"), b"\xff\xfe\x00")
        self.assertEqual(result["encoding"]["stdout"], "base64")
        # The first byte of 'é' is read alone (the cell waits between the two writes): it waits
        # for the second and the character comes whole, as text.
        s.submit("b = 'é'.encode()\nsys.stdout.buffer.write(b[:1]); sys.stdout.flush()\n"
                 "time.sleep(0.3)\nsys.stdout.buffer.write(b[1:] + b'!\\n'); sys.stdout.flush()",
                 stream=True)
        timed, result = s.events_then_result()
        events = [event for _, event in timed]
        self.assertTrue(all("encoding" not in e for e in events), events)
        self.assertEqual("".join(e["data"] for e in events), "é!\n")
        self.assertEqual(result["stdout"], "é!\n")

    def test_a_stream_that_is_not_a_boolean_is_a_bad_request_and_nothing_runs(self):
        s = self.session()
        for value in (1, "true", None, [], {}):
            r = s.cell("open('ran', 'w').close()", id=f"bad-{value!r}", stream=value)
            self.assertEqual(r["status"], "bad_request", r)
            self.assertIn('"stream" must be true or false', r["message"])
            self.assertEqual(r["id"], f"bad-{value!r}")
        r = s.cell("import os\nos.path.exists('ran')")
        self.assertEqual(r["value"], "False", "a bad request must not run")


if __name__ == "__main__":
    unittest.main()
