"""Tracebacks a model can repair from: every frame of the caller's code shows its source line,
in a session, an MCP server's run_python and a batch's code jobs (cloned and forked), as Jupyter
shows them; `run` names the script by the caller's path, as given, not /sandbox/NAME. A cell's filename ("<cell-2>") names no file, so Python 3.11's own printer would show
no line; the cell driver prints through traceback and linecache, which hold every cell's source.

Each front is driven through the real binary, as a client would; what is judged is the text the
caller reads (stderr, the MCP tool's text, the result's exception.traceback).
"""
from __future__ import annotations

import json
import subprocess
import unittest

from harness import (PYSANDBOX, SandboxTestCase, command_prefix, jobs_file, preload_marker,
                     result_schema, run, script, wait_for_no_leftovers)
from test_mcp_session_ends import Server

# Line 2 raises; its text must follow the frame's "File" line.
THREE_LINES = "a = 1\nb = a / 0  # the failing line\nc = 3"
FAILING = "    b = a / 0  # the failing line\n"
DEFINE = "def half(n):\n    return n / 0  # inside the function"
CALL = "x = 2\nhalf(x)"
LIBRARY = "import json\njson.loads('{not json')"
OWN_HOOK = ("import sys\n"
            "def hook(kind, value, tb):\n"
            "    print('own hook:', kind.__name__, file=sys.stderr)\n"
            "sys.excepthook = hook")
MODES = {"cloned": [], "forked": ["--fork"]}


def frame(cell: str, line: int, where: str, text: str) -> str:
    """A frame as the caller reads it: the File line and the source line under it."""
    return f'  File "{cell}", line {line}, in {where}\n    {text}\n'


class Session:
    """A `pysandbox session`: one cell per line, its result line read back."""

    def __init__(self, *options: str):
        self.proc = subprocess.Popen(command_prefix() + [PYSANDBOX, "session", *options],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)

    def cell(self, code: str) -> dict:
        self.proc.stdin.write((json.dumps({"code": code}) + "\n").encode())
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError("the session ended: " + self.proc.stderr.read().decode())
        result = json.loads(line)
        result_schema.validate(result)
        return result

    def close(self) -> int:
        self.proc.stdin.close()
        self.proc.stdout.read()
        self.proc.stderr.read()
        return self.proc.wait(timeout=30)


def text_of(result: dict) -> str:
    return "".join(block.get("text", "") for block in result["content"])


class TracebackTest(SandboxTestCase):
    def assertShown(self, text: str, *frames: str) -> None:
        for expected in frames:
            self.assertIn(expected, text)
        self.assertNotIn("pysandbox_driver", text)
        self.assertNotIn("/sandbox/", text)

    def test_run_names_the_callers_path(self):
        path = script(THREE_LINES + "\n", name="three.py")
        for given, cwd in ((str(path), None), ("three.py", path.parent),
                           ("./sub/../three.py", path.parent)):
            with self.subTest(given):
                if "sub" in given:
                    (path.parent / "sub").mkdir(exist_ok=True)
                    (path.parent / "sub").chmod(0o755)
                r = run(["run", given], cwd=cwd)
                self.assertEqual(r.returncode, 1, r.stderr)
                err = r.stderr.decode()
                self.assertIn(f'  File "{given}", line 2, in <module>\n' + FAILING, err)
                self.assertNotIn("/sandbox/", err)
                r = run(["run", "--json", given], cwd=cwd)
                exception = r.json()["exception"]
                self.assertEqual((exception["type"], exception["line"]), ("ZeroDivisionError", 2))
                self.assertIn(f'  File "{given}", line 2, in <module>\n' + FAILING,
                              exception["traceback"])
                self.assertIn(f'File "{given}", line 2', r.json()["stderr"])
        # A SyntaxError's frame has no ", in": renamed the same way.
        broken = script("x = 1\ndef f(:\n", name="broken.py")
        r = run(["run", str(broken)])
        self.assertIn(f'  File "{broken}", line 2\n', r.stderr.decode())
        # A script printing such a line itself gets the same harmless rewrite, on stderr only.
        printer = script('import sys\nline = \'  File "/sandbox/printer.py", line 1\'\n'
                         'print(line)\nprint(line, file=sys.stderr)\n', name="printer.py")
        r = run(["run", str(printer)])
        self.assertEqual(r.stdout.decode(), '  File "/sandbox/printer.py", line 1\n')
        self.assertEqual(r.stderr.decode(), f'  File "{printer}", line 1\n')
        # A replaced sys.excepthook is the script's own: what it prints is all there is of the
        # exception, so pysandbox says only how the script ended (issue 30's "what was lost").
        hooked = script(OWN_HOOK + "\n1 / 0\n", name="hooked.py")
        r = run(["run", str(hooked)])
        self.assertEqual(r.stderr.decode(),
                         "own hook: ZeroDivisionError\npysandbox: exited with status 1\n")

    def test_session_cells_show_their_lines(self):
        s = Session()
        try:
            r = s.cell(THREE_LINES)
            self.assertEqual(r["status"], "exception", r)
            self.assertEqual(r["exception"]["line"], 2)
            for text in (r["stderr"], r["exception"]["traceback"]):
                self.assertShown(text, '  File "<cell-1>", line 2, in <module>\n' + FAILING)
            s.cell(DEFINE)
            r = s.cell(CALL)
            self.assertEqual(r["status"], "exception", r)
            for text in (r["stderr"], r["exception"]["traceback"]):
                self.assertShown(text, frame("<cell-3>", 2, "<module>", "half(x)"),
                                 frame("<cell-2>", 2, "half",
                                       "return n / 0  # inside the function"))
            # Through a library: the library's frame keeps its own line.
            r = s.cell(LIBRARY)
            self.assertEqual(r["exception"]["type"], "json.decoder.JSONDecodeError", r)
            self.assertShown(r["stderr"], frame("<cell-4>", 2, "<module>",
                                                "json.loads('{not json')"),
                             "json/__init__.py\", line ", "return _default_decoder.decode(s)")
            r = s.cell("raise ValueError('plain')")
            self.assertShown(r["stderr"], frame("<cell-5>", 1, "<module>",
                                                "raise ValueError('plain')"))
            # A cell's own hook is the cell's: it is called, and prints what it prints.
            self.assertEqual(s.cell(OWN_HOOK)["status"], "ok")
            r = s.cell("1 / 0")
            self.assertEqual(r["exit_code"], 1, r)  # no traceback printed: "error", not parsed
            self.assertEqual(r["stderr"], "own hook: ZeroDivisionError\n")
            # A hook that fails: the exception is still printed, with its line.
            s.cell("import sys\ndef bad(*args):\n    raise RuntimeError('hook')\n"
                   "sys.excepthook = bad")
            r = s.cell("x = 1\nundefined_name")
            self.assertShown(r["stderr"], frame("<cell-9>", 2, "<module>", "undefined_name"),
                             "NameError: name 'undefined_name' is not defined")
        finally:
            self.assertEqual(s.close(), 0)

    def test_mcp_calls_show_their_lines(self):
        marker = preload_marker()
        server = Server(marker=marker)

        def run_python(code: str, **arguments) -> dict:
            return server.answer(server.tool("run_python", code=code, **arguments))["result"]

        try:
            r = run_python(THREE_LINES)
            self.assertTrue(r["isError"], r)
            self.assertShown(text_of(r), '  File "<cell-1>", line 2, in <module>\n' + FAILING)
            self.assertIn(FAILING, r["structuredContent"]["exception"]["traceback"])
            session = server.start_session()
            run_python(DEFINE, session_id=session)
            r = run_python(CALL, session_id=session)
            self.assertTrue(r["isError"], r)
            self.assertShown(text_of(r), frame("<cell-2>", 2, "<module>", "half(x)"),
                             frame("<cell-1>", 2, "half", "return n / 0  # inside the function"))
        finally:
            self.assertEqual(server.close()[0], 0)
        self.assertEqual(wait_for_no_leftovers(marker, 5.0), [])

    def test_batch_code_jobs_show_their_lines(self):
        jobs = jobs_file([{"id": "three", "code": THREE_LINES},
                          {"id": "library", "code": LIBRARY},
                          {"id": "hook", "code": OWN_HOOK + "\n1 / 0"}])
        for mode, options in MODES.items():
            with self.subTest(mode):
                r = run(["batch", *options, "--keep-order", str(jobs)], timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                three, library, hook = r.lines()  # each checked against the schema
                self.assertEqual(three["status"], "exception", three)
                for text in (three["stderr"], three["exception"]["traceback"]):
                    self.assertIn("line 2, in <module>\n" + FAILING, text)
                    self.assertNotIn("/sandbox/", text)
                self.assertIn("    json.loads('{not json')\n", library["stderr"])
                self.assertIn("return _default_decoder.decode(s)", library["stderr"])
                self.assertEqual(hook["stderr"], "own hook: ZeroDivisionError\n")


if __name__ == "__main__":
    unittest.main()
