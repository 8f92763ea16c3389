"""`pysandbox session`: one sandboxed interpreter whose state lives across cells.

The session is driven as a client would: NDJSON requests on its stdin, one line read at a time
from its stdout as it comes (select with generous timeouts, no sleeps). Every response must be a
JSON object on one line, valid under the result schema, carrying its request's id, and there are
exactly as many as there were requests; `Session` checks all of it for every test. Containment
is judged from the host: the sandbox's processes are the session's descendants in another PID
namespace, and after the session no process of those namespaces, no mount and no temp entry may
be left.
"""

import base64
import json
import os
import pty
import select
import signal
import subprocess
import time
import unittest

from harness import (PYSANDBOX, TIME_SLACK_SCALE, SandboxTestCase, command_prefix,
                     require_modules, result_schema, temp_dir)
from test_faults import HostState

ANSWER = 10  # seconds a response may take (a cell's own timeout is far shorter)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
HOST_PID_NAMESPACE = os.readlink("/proc/self/ns/pid")


def parents() -> dict[int, int]:
    """pid -> parent pid, for every process the host sees."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    # The command name may hold spaces and parentheses: the fields after it count.
                    found[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass  # gone meanwhile
    return found


def process_identity(pid: int) -> tuple[int, int]:
    """A process as the host knows it for good: its pid and start time (a pid is reused)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return pid, int(fields[19])  # starttime, field 22 of proc(5)


def alive(identity: tuple[int, int]) -> bool:
    try:
        return process_identity(identity[0]) == identity
    except OSError:
        return False


def namespace_init(pid: int) -> bool:
    """Whether the process is pid 1 of its PID namespace (the last of its NSpid)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("NSpid:"):
                return line.split()[-1] == "1"
    return False


def pid_namespace(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


class SandboxWatch:
    """The sandboxes of one session as the host sees them: the session's descendants in another
    PID namespace. note() while they live; survivors() afterwards.

    A PID namespace is known by its inode number and its init (pid 1 in it, by host pid and start
    time): once a namespace is gone the kernel gives its number to the next one, another test's
    sandbox as likely as not, and a namespace lives exactly as long as its init."""

    def __init__(self, session_pid: int):
        self.session_pid = session_pid
        self.inits: dict[str, set[tuple[int, int]]] = {}

    @property
    def namespaces(self) -> set[str]:
        return set(self.inits)

    def family(self) -> set[int]:
        tree = parents()
        family, grew = {self.session_pid}, True
        while grew:
            children = {pid for pid, parent in tree.items() if parent in family} - family
            family |= children
            grew = bool(children)
        return family - {self.session_pid}

    def note(self) -> set[str]:
        """Adds the PID namespaces of the session's descendants now; returns them."""
        if not os.path.exists(f"/proc/{self.session_pid}"):
            return set()
        now = set()
        for pid in self.family():
            namespace = pid_namespace(pid)
            if namespace in ("", HOST_PID_NAMESPACE):
                continue
            now.add(namespace)
            inits = self.inits.setdefault(namespace, set())
            try:
                if namespace_init(pid):
                    inits.add(process_identity(pid))
            except OSError:
                pass  # gone meanwhile
        return now

    def interpreter(self) -> int:
        """The host pid of the sandboxed interpreter (the cell driver)."""
        found = [pid for pid in self.family() if pid_namespace(pid) not in ("", HOST_PID_NAMESPACE)
                 and os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("python")]
        if len(found) != 1:
            raise AssertionError(f"expected one sandboxed interpreter, found {found}")
        return found[0]

    def in_namespaces(self, namespaces: set[str]) -> list[int]:
        """Host pids in those of `namespaces` that still live: whose init is one noted."""
        live = {namespace for namespace in namespaces
                if any(alive(init) for init in self.inits.get(namespace, ()))}
        return [int(name) for name in os.listdir("/proc")
                if name.isdigit() and pid_namespace(int(name)) in live]

    def survivors(self, grace: float = 1.0) -> list[int]:
        """Host pids still in a PID namespace of the session's sandboxes, after up to `grace`
        (scaled under the sanitizers: the host's teardown of a killed sandbox is slower there)."""
        if not self.namespaces:
            raise AssertionError("no sandbox of the session was ever seen from the host")
        deadline = time.monotonic() + grace * TIME_SLACK_SCALE
        while (left := self.in_namespaces(self.namespaces)) and time.monotonic() < deadline:
            time.sleep(0.01)
        return left

    def kill_survivors(self) -> None:
        for pid in self.in_namespaces(self.namespaces):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class Session:
    """A `pysandbox session` the test talks to. Requests get ids of its own making unless the test
    gives one; each response must carry its request's id, in order."""

    def __init__(self, *options: str):
        self.proc = subprocess.Popen(command_prefix() + [PYSANDBOX, "session", *options],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.watch = SandboxWatch(self.proc.pid)
        self.buffer = b""
        self.unanswered: list = []  # ids of the requests sent and not answered yet, in order
        self.sent = 0
        self.ended: tuple[int, bytes] | None = None

    # ---- requests and responses

    def send(self, line: bytes | dict, expect_id=None, answered: bool = True) -> None:
        """Writes one line; unless not `answered`, its response must carry `expect_id`."""
        data = line if isinstance(line, bytes) else json.dumps(line).encode()
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()
        if answered:
            self.unanswered.append(expect_id)

    def submit(self, code: str, **fields) -> object:
        """Sends a cell with a fresh id (or fields["id"]); returns the id."""
        self.sent += 1
        request = {"id": fields.pop("id", f"cell-{self.sent}"), "code": code, **fields}
        self.send(request, request["id"])
        return request["id"]

    def cell(self, code: str, **fields) -> dict:
        """Runs one cell and returns its response."""
        self.submit(code, **fields)
        return self.response()

    def read_line(self, timeout: float = ANSWER) -> bytes | None:
        """The next line of the session's stdout; None at its end."""
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise AssertionError(f"no line within {timeout}s; stdout so far "
                                     f"{self.buffer[:300]!r}; waiting for {self.unanswered}")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                if self.buffer:
                    raise AssertionError(f"stdout ended inside a line: {self.buffer[:300]!r}")
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def response(self, timeout: float = ANSWER) -> dict:
        """The response to the oldest unanswered request: one JSON object, with its id."""
        self.watch.note()
        line = self.read_line(timeout)
        if line is None:
            raise AssertionError(f"the session ended with {self.unanswered} unanswered")
        self.watch.note()  # the sandbox that answered, if it lives on
        return self.check(line)

    def check(self, line: bytes) -> dict:
        if not self.unanswered:
            raise AssertionError(f"a line no request asked for: {line[:300]!r}")
        [response] = result_schema.parse_lines(line + b"\n")  # one object, valid under the schema
        expected = self.unanswered.pop(0)
        if response.get("id") != expected:
            raise AssertionError(f"response for id {response.get('id')!r}, expected {expected!r}")
        return response

    def wait_for_file(self, name: str, timeout: float = ANSWER) -> None:
        """Until the cell running has made /tmp/work/NAME, seen through the interpreter's root."""
        path = f"/proc/{self.watch.interpreter()}/root/tmp/work/{name}"
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise AssertionError(f"the cell did not make {name} within {timeout}s")
            time.sleep(0.005)

    # ---- the end

    def end(self, timeout: float = ANSWER) -> tuple[int, bytes]:
        """Waits for the session to exit by itself: the lines still to come must each answer a
        request. Returns its exit status and stderr."""
        if self.ended is None:
            while (line := self.read_line(timeout)) is not None:
                self.check(line)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError("the session did not exit after its stdout ended") from None
            self.ended = (self.proc.returncode, self.proc.stderr.read())
        return self.ended

    def close(self, timeout: float = ANSWER) -> tuple[int, bytes]:
        """Closes stdin (the requests' end) and waits for the session to exit."""
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.end(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.watch.kill_survivors()
        self.proc.wait()


class SessionTestCase(SandboxTestCase):
    def setUp(self):
        super().setUp()
        self.host = HostState()

    def session(self, *options: str) -> Session:
        """A session that must end with every request answered and nothing left behind."""
        session = Session(*options)
        self.addCleanup(self.check_ended, session)
        return session

    def check_ended(self, session: Session) -> None:
        try:
            session.close()
        finally:
            self.assertNothingLeft(session.watch)
        self.assertEqual(session.unanswered, [], "requests that were never answered")

    def assertNothingLeft(self, watch: SandboxWatch) -> None:
        survivors = watch.survivors()
        watch.kill_survivors()
        self.assertEqual(survivors, [], "a process of the session's sandboxes outlived it")
        self.assertEqual(self.host.new_mounts(), set(), "a mount was left")
        self.assertEqual(self.host.new_temp_entries(), set(), "a temp entry was left")

    def assertStatus(self, response: dict, status: str, state: str = "kept") -> None:
        shown = {k: response.get(k) for k in ("status", "state", "message", "stdout", "stderr",
                                               "value", "warnings")}
        self.assertEqual((response["status"], response["state"]), (status, state), shown)


class StateTest(SessionTestCase):
    def test_variables_imports_open_files_and_work_files_survive_between_cells(self):
        s = self.session()
        self.assertStatus(s.cell("x = 41"), "ok")
        r = s.cell("x + 1")
        self.assertStatus(r, "ok")
        self.assertEqual(r["value"], "42")
        self.assertIsNone(s.cell("y = x")["value"], "an assignment has no value")
        s.cell("import fractions\nlog = open('log.txt', 'w')\nlog.write('one ')")
        s.cell("log.write('two'); log.flush()\nopen('/tmp/work/kept.txt', 'w').write('kept')")
        r = s.cell("log.close()\n(fractions.Fraction(1, 3), open('log.txt').read(), "
                   "open('kept.txt').read())")
        self.assertStatus(r, "ok")
        self.assertEqual(r["value"], "(Fraction(1, 3), 'one two', 'kept')")
        self.assertEqual(r["sandbox"], 1, "one sandbox throughout")
        self.assertEqual(s.cell("print('out'); 7")["stdout"], "out\n")
        self.assertEqual(s.close()[0], 0)

    def test_each_response_carries_its_request_id_whatever_its_type(self):
        s = self.session()
        for request_id in (0, "text", None, {"nested": [1, 2.5]}, [1, "two"]):
            r = s.cell("1", id=request_id)
            self.assertEqual(r["status"], "ok")
        s.send(b'{"code": "1"}', None)  # no id: null
        self.assertIsNone(s.response()["id"])
        self.assertEqual(s.close()[0], 0)


class TimeoutTest(SessionTestCase):
    def test_a_plain_loop_is_interrupted_and_the_state_kept(self):
        s = self.session()
        s.cell("x = 41")
        start = time.monotonic()
        r = s.cell("while True: pass", timeout="300ms")
        elapsed = time.monotonic() - start
        self.assertStatus(r, "timeout", "kept")
        self.assertIn("KeyboardInterrupt", r["stderr"])
        self.assertEqual(r["limits"]["wall_time_ms"], 300)
        self.assertGreaterEqual(r["usage"]["wall_ms"], 300)
        self.assertLess(elapsed, 3, "the interrupt ended the cell, not the session's limits")
        after = s.cell("x + 1", timeout=0.5)  # a number of seconds
        self.assertStatus(after, "ok")
        self.assertEqual((after["value"], after["sandbox"]), ("42", 1))

    def test_a_loop_that_ignores_sigint_loses_the_state_and_the_next_cell_starts_afresh(self):
        s = self.session()
        s.cell("x = 41")
        first = s.watch.note()
        first_interpreter = process_identity(s.watch.interpreter())
        r = s.cell("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                   "while True: pass", timeout="200ms")
        self.assertStatus(r, "timeout", "lost")
        self.assertGreaterEqual(r["usage"]["wall_ms"], 200 + 500, "the grace after SIGINT")
        self.assertIn("500ms", r["message"])
        self.assertEqual(s.watch.in_namespaces(first), [],
                         "the killed sandbox is gone before its result is out")
        after = s.cell("x")
        self.assertStatus(after, "exception")
        self.assertEqual(after["exception"]["type"], "NameError")
        self.assertEqual((r["sandbox"], after["sandbox"]), (1, 2))
        # A new interpreter, not the old one answering again. (Not "a PID namespace with
        # another inode number": the kernel reuses a freed namespace's number, and the first
        # one is gone, as checked above.)
        self.assertNotEqual(process_identity(s.watch.interpreter()), first_interpreter)
        self.assertEqual(s.cell("'still here'")["value"], "'still here'")

    def test_with_a_pool_the_cell_after_a_lost_state_runs_in_a_sandbox_started_before_it(self):
        s = self.session("--pool", "1")
        s.cell("x = 41")
        # Two sandboxes live (the session's and one started ahead), each in a PID namespace of
        # its own, as the host sees them; the cell ran in one of them.
        deadline = time.monotonic() + ANSWER
        while len(s.watch.note()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        live = s.watch.note()
        self.assertEqual(len(live), 2, "the session's sandbox and the warm one")
        r = s.cell("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                   "while True: pass", timeout="200ms")
        self.assertStatus(r, "timeout", "lost")
        after = s.cell("import os\nprint(os.readlink('/proc/self/ns/pid'))\nx")
        self.assertStatus(after, "exception")
        self.assertEqual(after["exception"]["type"], "NameError", "nothing of the lost state")
        self.assertEqual((r["cell"], r["sandbox"], after["cell"], after["sandbox"]), (2, 1, 3, 2))
        # It ran in the sandbox that was waiting before the loop began, not in a new one.
        self.assertIn(after["stdout"].strip(), live)

    def test_a_timeout_over_the_profiles_limit_is_lowered_with_a_warning(self):
        # The first cell waits for its sandbox to start: under the sanitizers and a loaded CI
        # machine that took over 2 s, so the profile's limit scales as the other time bounds do.
        limit = int(2 * TIME_SLACK_SCALE)
        s = self.session("--timeout", f"{limit}s")
        r = s.cell("1", timeout="1h")
        self.assertStatus(r, "ok")
        self.assertEqual(r["limits"]["wall_time_ms"], limit * 1000)
        self.assertTrue(any(f"{limit}s applies" in w for w in r["warnings"]), r["warnings"])


class LimitTest(SessionTestCase):
    def test_memory_is_the_sessions_two_cells_of_60_percent_hit_the_limit(self):
        s = self.session("--memory", "256MiB")
        size = 256 * 6 // 10 << 20
        self.assertStatus(s.cell(f"first = bytearray({size})"), "ok")
        r = s.cell(f"second = bytearray({size})")
        self.assertEqual(r["status"], "memory_limit", r["stderr"])
        self.assertGreaterEqual(r["usage"]["max_rss_kib"], size >> 10, "the session's peak")
        if r["state"] == "kept":  # the allocation failed (rlimit): the first one is still there
            self.assertEqual(s.cell("len(first)")["value"], str(size))
        else:  # the cgroup's OOM killer ended the sandbox
            self.assertEqual(s.cell("'first' in dir()")["sandbox"], 2)

    def test_the_output_cap_is_per_cell_and_keeps_head_and_tail(self):
        s = self.session("--output-limit", "4KiB")
        r = s.cell("print('HEAD' + 'x' * 100000 + 'TAIL')")
        self.assertStatus(r, "output_limit")
        self.assertTrue(r["truncated"]["stdout"])
        self.assertEqual(r["bytes"]["stdout"], 100009)
        self.assertTrue(r["stdout"].startswith("HEADxxx"), r["stdout"][:50])
        self.assertTrue(r["stdout"].endswith("xxxTAIL\n"), r["stdout"][-50:])
        self.assertRegex(r["stdout"], r"\[\.\.\. \d+ bytes omitted \.\.\.\]")
        self.assertLess(len(r["stdout"]), 4200)
        after = s.cell("print('small' * 300)")
        self.assertStatus(after, "ok")
        self.assertEqual(after["stdout"], "small" * 300 + "\n", "a fresh cap for the next cell")
        self.assertFalse(after["truncated"]["stdout"])


class BadRequestTest(SessionTestCase):
    BAD = [
        (b"print(1)", None, "not valid JSON"),
        (b"[1, 2]", None, "must be a JSON object, not array"),
        (b'{"id": 7}', 7, '"code" is missing'),
        (b'{"id": "t", "code": 42}', "t", '"code" must be a string, not number'),
        (b'{"id": 8, "code": "1", "timeout": [1]}', 8, '"timeout" must be a duration'),
        (b'{"id": 9, "code": "1", "timeout": "soon"}', 9, '"timeout"'),
        (b'{"id": 10, "code": "1", "timeout": -1}', 10, "more than 0"),
        (b'{"id": 11, "code": "1", "cwd": "/"}', 11, 'unknown field "cwd"'),
        (b'{"id": 12, "code": "1", "files": {}}', 12, '"files" must be an array'),
        (b'{"id": 13, "code": "1", "files": [{"name": "../x", "text": ""}]}', 13,
         "must be a plain file name"),
        (b'{"id": 14, "code": "1", "files": [{"name": "a", "base64": "!!"}]}', 14,
         "not valid base64"),
    ]

    def test_each_bad_request_is_answered_naming_the_problem_and_the_session_goes_on(self):
        s = self.session()
        s.cell("x = 41")
        for line, request_id, problem in self.BAD:
            s.send(line, request_id)
        s.send(b"   ", answered=False)  # a blank line is no request
        for line, _, problem in self.BAD:
            with self.subTest(line=line):
                r = s.response()
                self.assertEqual(r["status"], "bad_request")
                self.assertIn(problem, r["message"])
        r = s.cell("x + 1")
        self.assertEqual((r["status"], r["value"], r["cell"]), ("ok", "42", 2),
                         "nothing of the bad requests ran")
        self.assertEqual(s.close()[0], 0)

    def test_a_line_over_16_mib_is_a_bad_request_and_the_next_one_runs(self):
        s = self.session()
        s.send(b'{"id": 1, "code": "' + b"#" * (16 << 20) + b'"}', None)  # its id is not read
        r = s.response()
        self.assertEqual(r["status"], "bad_request")
        self.assertIn("over 16MiB", r["message"])
        self.assertEqual(s.cell("6 * 7")["value"], "42")


class FilesTest(SessionTestCase):
    def paths(self, response: dict) -> list[str]:
        return [entry["path"] for entry in response["files"]]

    def test_request_files_land_in_tmp_work_before_the_code_runs(self):
        s = self.session()
        data = bytes(range(256))
        r = s.cell("import os\n(os.getcwd(), open('a.txt').read(), open('b.bin', 'rb').read())",
                   files=[{"name": "a.txt", "text": "héllo"},
                          {"name": "b.bin", "base64": base64.b64encode(data).decode()}])
        self.assertStatus(r, "ok")
        self.assertEqual(r["value"], repr(("/tmp/work", "héllo", data)))

    def test_result_files_are_those_new_or_changed_since_the_previous_cell(self):
        s = self.session()
        r = s.cell("open('a.txt', 'w').write('1'); open('b.txt', 'w').write('2')")
        self.assertEqual(self.paths(r), ["a.txt", "b.txt"])
        self.assertEqual(r["files"][0]["size"], 1)
        self.assertEqual(self.paths(s.cell("x = 1")), [], "nothing changed")
        r = s.cell("open('b.txt', 'a').write('22')\nimport os; os.makedirs('d', exist_ok=True)\n"
                   "open('d/c.txt', 'w').write('3')")
        self.assertEqual(self.paths(r), ["b.txt", "d/c.txt"])
        self.assertEqual(r["files"][0]["size"], 3)
        r = s.cell("open('edited.txt', 'a').write(' and edited')",
                   files=[{"name": "in.txt", "text": "given"},
                          {"name": "edited.txt", "text": "given"}])
        self.assertEqual(self.paths(r), ["edited.txt"], "the request's own files are not listed")
        self.assertEqual(self.paths(s.cell("open('in.txt', 'a').write('!')")), ["in.txt"])
        self.assertEqual(self.paths(s.cell("import os; os.remove('a.txt')")), [])

    def test_output_dir_gets_each_cells_new_files_in_cell_n(self):
        out = temp_dir(0o777) / "out"  # absent: the session makes it
        s = self.session("--output-dir", str(out))
        s.cell("open('a.txt', 'w').write('first')")
        s.cell("x = 1")
        r = s.cell("open('a.txt', 'w').write('second'); open('b.txt', 'w').write('b')")
        self.assertEqual(r["files"][1]["host_path"], str(out / "cell-3" / "b.txt"))
        self.assertEqual(s.close()[0], 0)
        found = {str(p.relative_to(out)): p.read_text() for p in out.rglob("*") if p.is_file()}
        self.assertEqual(found, {"cell-1/a.txt": "first", "cell-3/a.txt": "second",
                                 "cell-3/b.txt": "b"})
        self.assertEqual(sorted(p.name for p in out.iterdir()), ["cell-1", "cell-3"])


class FiguresTest(SessionTestCase):
    NEEDS_MODULES = ("matplotlib", "pandas")

    def test_shown_and_open_figures_come_back_as_png_and_pandas_is_imported_once(self):
        s = self.session("-p", "datascience")
        r = s.cell("import matplotlib.pyplot as plt\n"
                   "plt.plot([1, 2, 3]); plt.show()\n"
                   "plt.figure(); plt.plot([3, 2, 1])\n"
                   "len(plt.get_fignums())")
        self.assertStatus(r, "ok")
        self.assertEqual(r["value"], "1", "plt.show() took its figure")
        self.assertEqual(len(r["figures"]), 2, r["warnings"])
        for figure in r["figures"]:
            self.assertEqual(figure["media_type"], "image/png")
            self.assertTrue(base64.b64decode(figure["data"]).startswith(PNG_SIGNATURE))
        r = s.cell("len(plt.get_fignums())")
        self.assertEqual((r["value"], r["figures"]), ("0", []), "open figures were closed")
        s.cell("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})")
        r = s.cell("import time; t = time.perf_counter(); import pandas\n"
                   "(int(df.a.sum()), time.perf_counter() - t < 0.05)")
        self.assertEqual(r["value"], "(6, True)", "pandas was already imported")


class ExceptionTest(SessionTestCase):
    def test_the_traceback_spans_cells_and_shows_no_driver_frame(self):
        s = self.session()
        s.cell("def f(n):\n    return 1 / n")
        r = s.cell("y = 1\nf(0)")
        self.assertStatus(r, "exception")
        exception = r["exception"]
        self.assertEqual((exception["type"], exception["line"]), ("ZeroDivisionError", 2))
        for text in (exception["traceback"], r["stderr"]):
            self.assertIn('File "<cell-2>", line 2, in <module>', text)
            self.assertIn('File "<cell-1>", line 2, in f', text)
            self.assertNotIn("pysandbox_driver", text)
            self.assertNotIn("/sandbox/", text)
        r = s.cell("def g(:\n  pass")
        self.assertStatus(r, "exception")
        self.assertEqual(r["exception"]["type"], "SyntaxError")
        self.assertNotIn("pysandbox_driver", r["stderr"])
        r = s.cell("import os\nos.fork()")  # denied by the profile's [policy]
        self.assertEqual(r["exception"]["type"], "PermissionError")
        self.assertNotIn("/sandbox/", r["stderr"], "the policy hook's frames are left out")
        self.assertEqual(s.cell("y")["value"], "1", "the state survived the exceptions")

    def test_tracebacks_and_warnings_printed_by_a_cell_show_its_lines(self):
        # The driver does not import linecache (it costs a start 3.6 ms); the cells' source
        # must still be there when a cell's first use of it prints a line.
        s = self.session()
        r = s.cell("import sys\nsorted(m for m in ('json', 're', 'enum', 'linecache', 'tokenize',"
                   " 'signal', 'base64', '__future__') if m in sys.modules)")
        self.assertEqual(r["value"], "[]", "the driver's start imports none of these")
        s.cell("def f(n):\n    return 1 / n")
        r = s.cell("import traceback\ntry:\n    f(0)\nexcept ZeroDivisionError:\n"
                   "    traceback.print_exc()\nimport warnings\nwarnings.warn('careful')")
        self.assertStatus(r, "ok")
        self.assertIn('File "<cell-3>", line 3, in <module>\n    f(0)\n', r["stderr"])
        self.assertIn('File "<cell-2>", line 2, in f\n    return 1 / n\n', r["stderr"])
        self.assertIn("<cell-3>:7: UserWarning: careful\n  warnings.warn('careful')\n",
                      r["stderr"])
        r = s.cell("import warnings\nwarnings.warn('again')")
        self.assertIn("<cell-4>:2: UserWarning: again\n  warnings.warn('again')\n", r["stderr"],
                      "a cell after linecache was imported")

    def test_cell_lines_survive_a_find_spec_and_an_import_around_the_driver(self):
        s = self.session()
        s.cell("import importlib.util, sys\nimportlib.util.find_spec('linecache') is not None")
        s.cell("def f(n):\n    return 1 / n")
        r = s.cell("import traceback\ntry:\n    f(0)\nexcept ZeroDivisionError:\n"
                   "    traceback.print_exc()")
        self.assertIn('File "<cell-2>", line 2, in f\n    return 1 / n\n', r["stderr"],
                      "a spec found is not an import")
        s = self.session()
        s.cell("import sys\nsys.meta_path = [finder for finder in sys.meta_path\n"
               "                 if type(finder).__module__ != 'pysandbox_driver']")
        s.cell("import linecache\ndef g(n):\n    return 1 / n")
        r = s.cell("import traceback\ntry:\n    g(0)\nexcept ZeroDivisionError:\n"
                   "    traceback.print_exc()")
        self.assertIn('File "<cell-2>", line 3, in g\n    return 1 / n\n', r["stderr"],
                      "linecache imported around the driver is filled at the next cell")


class ForgeryTest(SessionTestCase):
    """What the script writes, to its stdout or to the driver's channel (fd 5), is at most its
    own cell's word: it never adds, removes or alters a response line, ends a cell early or
    changes the status the supervisor found."""

    def forged_done(self, token: str) -> str:
        done = json.dumps({"kind": "done", "token": token, "outcome": "ok", "value": "'forged'"})
        return f"os.write(5, b'.00000000' + {done!r}.encode())\n"

    def test_fake_response_lines_on_stdout_stay_in_the_cells_stdout(self):
        s = self.session()
        fake = json.dumps({"id": "cell-2", "status": "ok", "value": "'forged'"})
        r = s.cell(f"import sys\nprint({fake!r})\nprint({fake!r}, file=sys.stderr)\n"
                   f"sys.stdout.write('{{\"id\": \"cell-3\"')")
        self.assertStatus(r, "ok")
        self.assertEqual(r["stdout"], fake + "\n" + '{"id": "cell-3"')
        self.assertEqual(r["stderr"], fake + "\n")
        self.assertIsNone(s.cell("x = 1")["value"])
        self.assertEqual(s.close()[0], 0)  # no line beyond one per request

    def test_raw_bytes_and_forged_records_on_the_drivers_channel_change_nothing(self):
        s = self.session()
        r = s.cell("import os\n"
                   "for junk in (b'', b'\\xff\\x00junk', b'+0000000', b'.zzzzzzzz{}', b'x' * 70000):\n"
                   "    try:\n"
                   "        os.write(5, junk)\n"
                   "    except OSError:\n"
                   "        pass\n"
                   "os.write(5, b'+00000000{\"kind\": \"done\", ')\n"  # a message left unfinished
                   "print('after')\n"
                   "'real'")
        self.assertStatus(r, "ok")
        self.assertEqual((r["stdout"], r["value"]), ("after\n", "'real'"))
        r = s.cell("import os\n" + self.forged_done("0" * 32) + "print('went on')\n"
                   "raise ValueError('real')")
        self.assertStatus(r, "exception")
        self.assertEqual((r["stdout"], r["value"]), ("went on\n", None))
        start = time.monotonic()
        r = s.cell("import os\n" + self.forged_done("") + "while True: pass", timeout="300ms")
        self.assertStatus(r, "timeout", "kept")
        self.assertGreaterEqual(time.monotonic() - start, 0.3, "the forged done ended nothing")
        self.assertEqual(s.cell("'next'")["value"], "'next'")

    def test_a_done_with_the_cells_own_token_cannot_break_the_framing_or_the_timeout(self):
        # The token is in the driver's frame, in the script's process: the script can read it
        # and end its own cell's response early. That is its word about its own cell; the
        # supervisor still keeps the time of the next cell, and every request is answered once.
        # (It writes as the driver does, kind and token first: the supervisor skips any message
        # that does not begin with the head it waits for.)
        s = self.session()
        s.submit("import os, signal, sys\n"
                 "frame = sys._getframe()\n"
                 "while 'message' not in frame.f_locals:\n"
                 "    frame = frame.f_back\n"
                 "token = frame.f_locals['message']['token']\n"
                 "os.write(5, b'.00000000' + ('{\"kind\":\"done\",\"token\":\"%s\",'\n"
                 "         '\"outcome\":\"ok\",\"value\":\"1\"}' % token).encode())\n"
                 "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                 "while True: pass")
        s.submit("'next'", timeout="300ms")
        s.submit("'third'")
        forged, after, third = s.response(), s.response(), s.response()
        self.assertEqual((forged["status"], forged["value"]), ("ok", "1"))
        self.assertStatus(after, "timeout", "lost")
        self.assertStatus(third, "ok")
        self.assertEqual((third["value"], third["sandbox"]), ("'third'", 2))
        self.assertEqual(s.close()[0], 0)

    def test_closing_the_drivers_channel_loses_the_state_not_the_session(self):
        s = self.session()
        r = s.cell("import os; os.close(5)", timeout="500ms")
        self.assertEqual(r["state"], "lost", r)
        self.assertNotEqual(r["status"], "ok")
        self.assertEqual(s.cell("'fresh'")["sandbox"], 2)


class EndTest(SessionTestCase):
    """Closing stdin, a signal, the idle timeout and the lifetime each end the session, and
    nothing of its sandboxes is left (checked after each test by check_ended)."""

    def test_end_of_input_waits_for_the_running_cell_then_exits_0(self):
        s = self.session()
        s.cell("x = 1")
        s.submit("import time; time.sleep(0.2); print('finished')")
        s.proc.stdin.close()
        self.assertEqual(s.response()["stdout"], "finished\n")
        code, stderr = s.end()
        self.assertEqual((code, stderr), (0, b""))

    def signal_session(self, sig: int, during_cell: bool, after_eof: bool = False) -> None:
        s = self.session()
        s.cell("x = 1")
        if during_cell:
            s.submit("open('started', 'w').close()\nwhile True: pass", timeout="4s")
            s.wait_for_file("started")
        if after_eof:  # the session waits for its last cell
            s.proc.stdin.close()
        s.watch.note()
        s.proc.send_signal(sig)
        if during_cell:
            r = s.response()
            self.assertStatus(r, "killed", "lost")
            self.assertIn(signal.Signals(sig).name, r["message"])
        code, _ = s.end()
        self.assertEqual(code, 128 + sig)

    def test_sigterm_ends_the_session_with_143(self):
        self.signal_session(signal.SIGTERM, during_cell=False)

    def test_sigint_ends_the_session_with_130(self):
        self.signal_session(signal.SIGINT, during_cell=False)

    def test_sigterm_during_a_cell_answers_it_killed_and_exits_143(self):
        self.signal_session(signal.SIGTERM, during_cell=True)

    def test_sigint_during_a_cell_answers_it_killed_and_exits_130(self):
        self.signal_session(signal.SIGINT, during_cell=True)

    def test_sigterm_after_end_of_input_still_ends_the_last_cell_at_once(self):
        self.signal_session(signal.SIGTERM, during_cell=True, after_eof=True)

    def test_the_idle_timeout_ends_a_session_that_gets_no_request(self):
        s = self.session("--idle-timeout", "500ms")
        s.cell("x = 1")
        start = time.monotonic()
        code, stderr = s.end()  # stdin still open
        self.assertGreaterEqual(time.monotonic() - start, 0.4)
        self.assertEqual(code, 0)
        self.assertIn(b"no request for 500ms (limits.idle_timeout)", stderr)

    def test_the_lifetime_ends_the_session_and_its_running_cell(self):
        s = self.session("--lifetime", "1s")
        start = time.monotonic()
        s.cell("x = 1")
        r = s.cell("import time; time.sleep(30)", timeout="20s")
        elapsed = time.monotonic() - start
        self.assertTrue(0.9 <= elapsed < 3, f"{elapsed:.2f}s: the lifetime, not the cell's 5s")
        self.assertStatus(r, "killed", "lost")
        self.assertIn("lifetime of 1s", r["message"])
        code, stderr = s.end()
        self.assertEqual(code, 0)
        self.assertIn(b"lifetime of 1s was reached", stderr)


class ReplTest(SessionTestCase):
    def read_until(self, fd: int, token: bytes, timeout: float = ANSWER) -> bytes:
        deadline = time.monotonic() + timeout
        while token not in self.seen:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise AssertionError(f"{token!r} did not come; the terminal shows {self.seen!r}")
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the session closed the terminal
                chunk = b""
            if not chunk:
                raise AssertionError(f"the terminal closed before {token!r}: {self.seen!r}")
            self.seen += chunk
        shown, _, self.seen = self.seen.partition(token)
        return shown

    def on_a_terminal(self, *options: str) -> tuple[int, int]:
        """`pysandbox session OPTIONS` on a new terminal: its pid and the terminal's fd."""
        pid, fd = pty.fork()
        if pid == 0:  # the session, on the terminal
            try:
                command = command_prefix() + [PYSANDBOX, "session", *options]
                os.execvp(command[0], command)
            finally:
                os._exit(127)
        self.seen = b""
        return pid, fd

    def end(self, pid: int, fd: int) -> None:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)

    def test_the_repl_saves_figures_under_output_dir(self):
        require_modules("matplotlib")
        out = temp_dir(0o777) / "out"
        pid, fd = self.on_a_terminal("-p", "datascience", "--output-dir", str(out))
        try:
            self.read_until(fd, b">>> ", timeout=90)
            os.write(fd, b"import matplotlib.pyplot as plt\n")
            self.read_until(fd, b">>> ", timeout=60)
            os.write(fd, b"plt.plot([1, 2]); plt.show()\n")
            shown = self.read_until(fd, b">>> ", timeout=60)
            saved = out / "cell-2" / "figure-1.png"
            self.assertIn(f"pysandbox: figure saved: {saved}".encode(), shown)
            self.assertEqual(saved.read_bytes()[:8], PNG_SIGNATURE)
            os.write(fd, b"plt.plot([3, 4])\n")  # left open: saved as well
            shown = self.read_until(fd, b">>> ", timeout=60)
            self.assertIn(f"figure saved: {out}/cell-3/figure-2.png".encode(), shown)
            os.write(fd, b"\x04")
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        finally:
            self.end(pid, fd)

    def test_a_terminal_gets_a_repl_and_ctrl_c_interrupts_the_cell(self):
        pid, fd = self.on_a_terminal()
        watch = SandboxWatch(pid)
        try:
            self.read_until(fd, b">>> ")
            watch.note()
            os.write(fd, b"x = 2\n")
            self.assertEqual(self.read_until(fd, b">>> "), b"x = 2\r\n")
            os.write(fd, b"x * 21\n")
            self.assertEqual(self.read_until(fd, b">>> "), b"x * 21\r\n42\r\n")
            os.write(fd, b"if True:\n")
            self.read_until(fd, b"... ")
            os.write(fd, b"    print('looping', flush=True)\n")
            self.read_until(fd, b"... ")
            os.write(fd, b"    while True: pass\n\n")
            self.read_until(fd, b"looping\r\n")
            os.write(fd, b"\x03")  # Ctrl-C
            self.assertIn(b"KeyboardInterrupt", self.read_until(fd, b">>> "))
            os.write(fd, b"x * 21\n")
            self.assertIn(b"42", self.read_until(fd, b">>> "), "the state was kept")
            os.write(fd, b"\x04")  # Ctrl-D
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        finally:
            self.end(pid, fd)
        self.assertNothingLeft(watch)


if __name__ == "__main__":
    unittest.main()
