"""schema/pysandbox.result.v1.json, the --json result's contract, is a valid JSON Schema (draft
2020-12) that can fail: it accepts the shapes pysandbox and the front doors write, and rejects
hand-made objects that break the contract in one place each. That every result the integration
and attack suites see is valid is checked where they parse it (tests/support/result_schema.py)."""

import copy
import re
import unittest

from docs_support import REPO, result_schema

# A result as `pysandbox run --json -c 'print(1)'` prints it.
OK = {
    "schema": "pysandbox.result/v1", "version": "0.1.0", "status": "ok", "exit_code": 0,
    "signal": None, "pysandbox_exit_code": 0, "message": None, "stdout": "1\n", "stderr": "",
    "encoding": {"stdout": "utf-8", "stderr": "utf-8"}, "output": [["stdout", 2]],
    "truncated": {"stdout": False, "stderr": False}, "bytes": {"stdout": 2, "stderr": 0},
    "exception": None, "violations": [], "files": [], "files_omitted": 0, "syscalls": None,
    "usage": {"wall_ms": 34, "cpu_ms": 15, "max_rss_kib": 9052, "setup_ms": 13, "collect_ms": 0},
    "limits": {"wall_time_ms": 5000, "cpu_time_ms": 5000, "memory_bytes": 268435456,
               "max_procs": 64, "open_files": 256, "file_size_bytes": 67108864,
               "tmp_size_bytes": 67108864, "output_limit_bytes": 16777216, "cpus": 1,
               "network": "none"},
    "enforcement": {"namespaces": ["user", "mount", "pid", "network", "ipc", "uts", "cgroup"],
                    "seccomp": "errno", "landlock": 7,
                    "landlock_rights": ["fs", "ioctl_dev", "tcp", "scopes"],
                    "no_new_privs": True, "capabilities": [],
                    "resources": "rlimit", "audit_hook": "installed", "host_uid": 65534,
                    "degraded": ["cgroup"]},
    "profile": "default", "error": None, "warnings": [],
}

# An uncaught exception, a blocked import, an artifact and a traced call.
EXCEPTION = {
    **OK, "status": "exception", "exit_code": 1, "pysandbox_exit_code": 1,
    "stderr": "Traceback (most recent call last):\n...", "output": [["stderr", 40]],
    "exception": {"type": "ZeroDivisionError", "message": "division by zero", "line": 1,
                  "traceback": "Traceback (most recent call last):\n...",
                  "summary": "ZeroDivisionError: division by zero (line 1)", "hint": None},
    "violations": [{"kind": "import", "what": "ctypes", "count": 1, "action": "denied"}],
    "files": [{"path": "plot.png", "size": 1200, "sha256": "ab" * 32, "media_type": "image/png",
               "host_path": None}],
    "syscalls": [{"name": "mkdir", "count": 1, "verdict": "errno EACCES"}],
}

# pysandbox refused the command line: no sandbox was made.
EARLY_ERROR = {
    **OK, "status": "sandbox_error", "exit_code": None, "pysandbox_exit_code": 125,
    "message": "error: --timeout: invalid duration", "stdout": "", "output": [],
    "bytes": {"stdout": 0, "stderr": 0}, "usage": None, "limits": None, "enforcement": None,
    "error": {"message": "error: --timeout: invalid duration", "step": None, "errno": None},
}

# A session's cell, with every field the front doors add.
CELL = {
    **OK, "exit_code": None, "pysandbox_exit_code": None, "id": {"any": ["json", 1]},
    "value": "42", "figures": [{"media_type": "image/png", "data": "iVBORw0KGgo="}],
    "state": "kept", "cell": 3, "sandbox": 1, "worker": "tcp://10.0.0.2:40111",
}

# A session's cell that its timeout interrupted, the sandbox going on (`pysandbox session`).
CELL_TIMEOUT = {
    **CELL, "status": "timeout", "pysandbox_exit_code": 124, "value": None, "figures": [],
    "message": "the cell's timeout of 1s was reached; it was interrupted (KeyboardInterrupt) and "
               "the session's state was kept",
    "violations": [{"kind": "resource", "what": "wall_time", "count": 1,
                    "action": "interrupted"}],
}

# A batch line that was not a job, or a session line that was no request: only these five.
BAD_REQUEST = {"schema": "pysandbox.result/v1", "version": "0.1.0", "status": "bad_request",
               "id": None, "message": "line 3: not JSON"}

# A run whose packages pip could not install (and `env create --json`'s failure).
INSTALL_ERROR = {"schema": "pysandbox.result/v1", "version": "0.1.0", "status": "install_error",
                 "pysandbox_exit_code": 123,
                 "message": "pip exited 1: No matching distribution found for nosuchpkg",
                 "install": {"requested": ["nosuchpkg"],
                             "output_tail": "ERROR: No matching distribution found for nosuchpkg\n",
                             "denied_connections": []}}

# A batch job's result and a batch line that was no job: each with its line in the input.
BATCH_JOB = {**EXCEPTION, "id": "job-a", "line": 2}
BATCH_BAD_LINE = {**BAD_REQUEST, "line": 3}


def changed(base: dict, path: str, value=None, *, delete: bool = False) -> dict:
    """A deep copy of ``base`` with the value at ``path`` ("a.b.0") replaced or deleted."""
    obj = copy.deepcopy(base)
    *parents, last = path.split(".")
    target = obj
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    key = int(last) if isinstance(target, list) else last
    if delete:
        del target[key]
    else:
        target[key] = value
    return obj


# Each breaks the contract in one place; the schema must reject every one.
BAD = {
    "status not one of the statuses": changed(OK, "status", "fine"),
    "another schema": changed(OK, "schema", "pysandbox.result/v2"),
    "a run field missing": changed(OK, "files_omitted", delete=True),
    "a field the contract lacks": changed(OK, "extra", 1),
    "exit_code as a string": changed(OK, "exit_code", "0"),
    "a run without pysandbox's exit status": changed(OK, "pysandbox_exit_code", None),
    "exit_code past 255": changed(EXCEPTION, "exit_code", 256),
    "stdout as bytes would be (a list)": changed(OK, "stdout", [49, 10]),
    "an encoding that is not utf-8 or base64": changed(OK, "encoding.stdout", "latin-1"),
    "base64 stdout that is not base64": changed(changed(OK, "encoding.stdout", "base64"),
                                               "stdout", "1\n"),
    "an output segment of three": changed(OK, "output.0", ["stdout", 2, 0]),
    "an output segment of another stream": changed(OK, "output.0", ["stdin", 2]),
    "a signal that is not a name": changed(changed(EXCEPTION, "exit_code", None), "signal", "9"),
    "ok with a signal": changed(changed(OK, "exit_code", None), "signal", "SIGKILL"),
    "ok with a non-zero exit": changed(OK, "exit_code", 1),
    "an exit code and a signal": changed(EXCEPTION, "signal", "SIGKILL"),
    "exception status without the exception": changed(EXCEPTION, "exception", None),
    "an exception without a summary": changed(EXCEPTION, "exception.summary", delete=True),
    "an exception on line 0": changed(EXCEPTION, "exception.line", 0),
    "a violation of an unknown kind": changed(EXCEPTION, "violations.0.kind", "telepathy"),
    "a violation counted 0 times": changed(EXCEPTION, "violations.0.count", 0),
    "a violation's action unknown": changed(EXCEPTION, "violations.0.action", "ignored"),
    "a run, not a cell, interrupted": changed(
        changed(OK, "status", "timeout"), "violations",
        CELL_TIMEOUT["violations"]),
    "an artifact whose sha256 is not one": changed(EXCEPTION, "files.0.sha256", "abc"),
    "an artifact skipped for no known reason": changed(EXCEPTION, "files.0.skipped", "meh"),
    "a traced call without a verdict": changed(EXCEPTION, "syscalls.0.verdict", delete=True),
    "usage without setup_ms": changed(OK, "usage.setup_ms", delete=True),
    "a negative wall time": changed(OK, "usage.wall_ms", -1),
    "a network mode that does not exist": changed(OK, "limits.network", "host"),
    "no_new_privs off": changed(OK, "enforcement.no_new_privs", False),
    "a capability kept": changed(OK, "enforcement.capabilities", ["CAP_SYS_ADMIN"]),
    "a namespace missing": changed(OK, "enforcement.namespaces",
                                   ["user", "mount", "pid", "network", "ipc", "uts"]),
    "run as host root": changed(OK, "enforcement.host_uid", 0),
    "landlock true instead of an ABI": changed(OK, "enforcement.landlock", True),
    "a landlock right that does not exist": changed(OK, "enforcement.landlock_rights", ["udp"]),
    "no landlock_rights": changed(OK, "enforcement.landlock_rights", delete=True),
    "an install_error without pip's output": changed(INSTALL_ERROR, "install.output_tail",
                                                     delete=True),
    "an install_error with another exit code": changed(INSTALL_ERROR, "pysandbox_exit_code", 125),
    "an install_error with run fields": changed(INSTALL_ERROR, "stdout", ""),
    "a run status without the run fields": changed(INSTALL_ERROR, "status", "error"),
    "sandbox_error without error": changed(EARLY_ERROR, "error", None),
    "an error on a run that went fine": changed(OK, "error", EARLY_ERROR["error"]),
    "an empty message": changed(EARLY_ERROR, "message", ""),
    "bad_request without id": changed(BAD_REQUEST, "id", delete=True),
    "bad_request without message": changed(BAD_REQUEST, "message", delete=True),
    "bad_request that printed something": changed(BAD_REQUEST, "stdout", "1\n"),
    "bad_request with a field runs lack": changed(BAD_REQUEST, "extra", 1),
    "a figure that is not a PNG": changed(CELL, "figures.0.media_type", "image/jpeg"),
    "a figure that is not base64": changed(CELL, "figures.0.data", "not base64!"),
    "a state neither kept nor lost": changed(CELL, "state", "maybe"),
    "a cell without its state": changed(CELL, "state", delete=True),
    "a cell without the request's id": changed(CELL, "id", delete=True),
    "a cell without its figures": changed(CELL_TIMEOUT, "figures", delete=True),
    "cell 0": changed(CELL, "cell", 0),
    "sandbox as a string": changed(CELL, "sandbox", "1"),
    "value that is not a repr string": changed(CELL, "value", 42),
    "an empty worker": changed(CELL, "worker", ""),
    "a batch line 0": changed(BATCH_JOB, "line", 0),
    "a batch line as a string": changed(BATCH_BAD_LINE, "line", "3"),
    "not an object": ["pysandbox.result/v1"],
}


class ResultSchemaTest(unittest.TestCase):
    def test_the_schema_is_a_valid_2020_12_schema_for_objects(self):
        schema = result_schema.load_schema()
        self.assertEqual(schema["$schema"], "https://json-schema.org/draft/2020-12/schema")
        self.assertEqual(schema["type"], "object", "MCP needs an object as outputSchema")
        result_schema.validator()  # check_schema raises SchemaError where it is not

    def test_the_statuses_are_the_ones_the_code_writes(self):
        code = (REPO / "src/report/status.cpp").read_text()
        to_string = re.search(r"string_view to_string\(Status status\) \{\n(.*?)\n\}", code,
                              re.DOTALL)
        self.assertIsNotNone(to_string, "src/report/status.cpp's to_string(Status) not found")
        written = set(re.findall(r'case Status::\w+: return "(\w+)";', to_string[1]))
        self.assertGreaterEqual(len(written), 10, "src/report/status.cpp's to_string(Status) not found")
        enum = result_schema.load_schema()["$defs"]["status"]["enum"]
        self.assertEqual(len(enum), len(set(enum)))
        self.assertEqual(set(enum), written | {"bad_request", "install_error"})

    def test_what_pysandbox_and_the_front_doors_write_is_accepted(self):
        for name, obj in [("ok", OK), ("exception", EXCEPTION), ("early error", EARLY_ERROR),
                          ("session cell", CELL), ("cell timeout", CELL_TIMEOUT),
                          ("bad request", BAD_REQUEST), ("batch job", BATCH_JOB),
                          ("batch bad line", BATCH_BAD_LINE), ("install error", INSTALL_ERROR)]:
            with self.subTest(name):
                self.assertEqual(result_schema.problems(obj), [])

    def test_each_broken_object_is_rejected(self):
        for name, obj in BAD.items():
            with self.subTest(name):
                with self.assertRaises(result_schema.SchemaError):
                    result_schema.validate(obj)

    def test_parse_result_wants_one_line_of_one_valid_object(self):
        import json
        line = json.dumps(OK) + "\n"
        self.assertEqual(result_schema.parse_result(line.encode()), OK)
        for name, stdout in [("no newline", line[:-1]), ("two results", line + line),
                             ("nothing", ""), ("not JSON", "{\n"), ("not UTF-8", b"\xff\n")]:
            with self.subTest(name):
                with self.assertRaises(result_schema.SchemaError):
                    result_schema.parse_result(stdout)


if __name__ == "__main__":
    unittest.main()
