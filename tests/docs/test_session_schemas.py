"""schema/pysandbox.session-request.v1.json and pysandbox.session-event.v1.json, a session's
request line and its event lines ("stream": true): valid JSON Schemas (draft 2020-12) that accept
what the man page describes and reject what pysandbox refuses, one problem each. That every event
a session writes fits is checked where the integration tests read them
(tests/integration/test_session_stream.py)."""

import json
import unittest

from docs_support import REPO

REQUEST = REPO / "schema" / "pysandbox.session-request.v1.json"
EVENT = REPO / "schema" / "pysandbox.session-event.v1.json"

GOOD_REQUESTS = [
    {"code": "1"},
    {"id": {"any": [1]}, "code": "x = 1", "timeout": "2s", "stream": True,
     "files": [{"name": "a.csv", "text": "1,2"}, {"name": "b", "base64": "AAE="}]},
    {"id": None, "code": "", "timeout": 0.25, "stream": False},
]
BAD_REQUESTS = {
    "no code": {"id": 1},
    "stream as a number": {"code": "", "stream": 1},
    "stream as a string": {"code": "", "stream": "true"},
    "stream null": {"code": "", "stream": None},
    "an unknown field": {"code": "", "streams": True},
    "a timeout of 0": {"code": "", "timeout": 0},
    "a file with text and base64": {"code": "", "files": [{"name": "a", "text": "", "base64": ""}]},
}
GOOD_EVENTS = [
    {"id": "cell-1", "event": "stdout", "data": "hello\n"},
    {"id": None, "event": "stderr", "data": "//4A", "encoding": "base64"},
    {"id": [1, {"a": 2}], "event": "stdout", "data": ""},
]
BAD_EVENTS = {
    "no id": {"event": "stdout", "data": "x"},
    "another stream": {"id": 1, "event": "stdin", "data": "x"},
    "data as bytes would be": {"id": 1, "event": "stdout", "data": [120]},
    "an encoding but base64": {"id": 1, "event": "stdout", "data": "x", "encoding": "utf-8"},
    "a result's field": {"id": 1, "event": "stdout", "data": "x", "status": "ok"},
}


def validator(path):
    import jsonschema
    schema = json.loads(path.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


class SessionSchemasTest(unittest.TestCase):
    def check(self, path, good, bad):
        schema = validator(path)
        for obj in good:
            self.assertEqual([e.message for e in schema.iter_errors(obj)], [], obj)
        for why, obj in bad.items():
            self.assertFalse(schema.is_valid(obj), f"{path.name} accepts {why}: {obj}")

    def test_the_request_schema(self):
        self.check(REQUEST, GOOD_REQUESTS, BAD_REQUESTS)

    def test_the_event_schema(self):
        self.check(EVENT, GOOD_EVENTS, BAD_EVENTS)

    def test_an_event_is_never_taken_for_a_result_nor_a_result_for_an_event(self):
        from docs_support import result_schema
        event = GOOD_EVENTS[0]
        self.assertTrue(result_schema.problems(event), "an event must not be a valid result")
        result = {"schema": "pysandbox.result/v1", "version": "0.1.0", "status": "bad_request",
                  "id": None, "message": "not JSON"}
        self.assertFalse(validator(EVENT).is_valid(result))


if __name__ == "__main__":
    unittest.main()
