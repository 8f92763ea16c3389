"""pysandbox.Session against the built binary: one interpreter across cells, a timeout that
keeps or loses the state, bad requests as results, pysandbox's own failures as SandboxError,
and nothing left running after close."""

import time

import pytest

import pysandbox
from pysandbox import CellResult, FileInfo, SandboxError, Status
from support import checked, descendants, exits, gone


def cell(session: pysandbox.Session, code: str, **kwargs) -> CellResult:
    result = checked(session.run(code, **kwargs))
    assert isinstance(result, CellResult)
    return result


def test_state_is_kept_across_cells():
    with pysandbox.Session() as session:
        first = cell(session, "x = 40\nimport math\nprint('set')")
        second = cell(session, "x + int(math.sqrt(4))")
    assert (first.status, first.stdout, first.value, first.cell) == (Status.OK, "set\n", None, 1)
    assert (second.status, second.value, second.cell, second.sandbox) == (Status.OK, "42", 2, 1)
    assert first.kept and second.kept and first.id != second.id


def test_files_reach_the_working_directory_and_an_exception_is_a_result():
    with pysandbox.Session() as session:
        result = cell(session, "open('a.txt').read() + open('b.bin', 'rb').read().hex()",
                      files={"a.txt": "text:", "b.bin": b"\x00\xff"})
        failed = cell(session, "1 / 0")
    assert result.value == "'text:00ff'"
    assert failed.status is Status.EXCEPTION and failed.kept
    assert failed.exception is not None and failed.exception.type == "ZeroDivisionError"


def test_a_cell_timeout_interrupts_and_keeps_the_state():
    with pysandbox.Session() as session:
        cell(session, "kept = 'yes'")
        stopped = cell(session, "while True:\n    pass\n", timeout=0.3)
        after = cell(session, "kept")
    assert stopped.status is Status.TIMEOUT and stopped.state == "kept"
    assert (after.status, after.value, after.sandbox) == (Status.OK, "'yes'", 1)


def test_a_cell_that_ignores_the_interrupt_loses_the_state():
    with pysandbox.Session() as session:
        cell(session, "kept = 'yes'")
        killed = cell(session, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                               "while True:\n    pass\n", timeout="300ms")
        after = cell(session, "kept")
    assert killed.status is Status.TIMEOUT and killed.state == "lost" and not killed.kept
    assert after.status is Status.EXCEPTION and after.sandbox == 2
    assert after.exception is not None and after.exception.type == "NameError"


def test_a_bad_request_is_a_result_and_the_session_goes_on():
    with pysandbox.Session() as session:
        bad = session.run("1", timeout="soon")
        good = cell(session, "2")
    assert bad.status is Status.BAD_REQUEST and bad.message
    assert good.value == "2"


def test_a_bad_profile_raises_with_pysandbox_s_message():
    session = pysandbox.Session(profile="no-such-profile")
    with pytest.raises(SandboxError) as raised:
        session.run("1")
    assert raised.value.returncode == 125
    assert 'profile "no-such-profile" not found' in raised.value.message
    assert session.closed
    with pytest.raises(SandboxError, match="closed"):
        session.run("1")


def test_a_missing_binary_raises():
    with pytest.raises(SandboxError, match="cannot run"):
        pysandbox.Session(binary="/nonexistent/pysandbox")


def test_close_leaves_nothing_running():
    session = pysandbox.Session()
    assert cell(session, "import os\nos.getpid()").ok
    process = session._process
    before = descendants(process.pid)
    assert before, "the session's sandbox should be running while the session is open"
    session.close()
    assert process.returncode is not None and session.closed
    assert not [pid for pid in before if not exits(pid, within=5)]
    session.close()  # twice is harmless


def test_close_kills_a_session_that_does_not_end(monkeypatch):
    import pysandbox._session as module

    monkeypatch.setattr(module, "_CLOSE_GRACE_SECONDS", 0.2)
    session = pysandbox.Session(timeout="30s")
    process = session._process
    assert cell(session, "1").ok  # the sandbox is up
    # A cell still running when stdin closes: the session would end only with it.
    process.stdin.write(b'{"id": "busy", "code": "import time\\ntime.sleep(20)"}\n')
    process.stdin.flush()
    sandbox = descendants(process.pid)
    assert sandbox
    session.close()
    assert process.returncode == -9  # killed: the session would have waited for the cell
    # The sandbox dies with its supervisor (PR_SET_PDEATHSIG), a moment later.
    assert not [pid for pid in sandbox if not exits(pid, within=5)]



def test_output_dir_gets_each_cell_s_files(shared_dir):
    target = shared_dir.path / "out"
    with pysandbox.Session(output_dir=target) as session:
        first = cell(session, "open('a.txt', 'w').write('one')")
        cell(session, "open('b.txt', 'w').write('two')")
    assert (target / "cell-1/a.txt").read_text() == "one"
    assert (target / "cell-2/b.txt").read_text() == "two"
    assert [f.host_path for f in first.files] == [str(target / "cell-1/a.txt")]


def test_read_file_and_list_files_read_inside_the_sandbox():
    data = bytes(range(256)) * 1000
    with pysandbox.Session() as session:
        cell(session, "import os\nos.makedirs('d/e')\n"
                      "open('d/e/x.bin', 'wb').write(bytes(range(256)) * 1000)\n"
                      "open('/tmp/elsewhere.txt', 'w').write('not in /tmp/work')\nkept = 1")
        assert session.read_file("d/e/x.bin") == data
        assert session.read_file("/tmp/work/d/e/x.bin") == data
        # Outside /tmp/work: no host copy of it exists anywhere.
        assert session.read_file("/tmp/elsewhere.txt") == b"not in /tmp/work"
        listed = session.list_files()
        assert [(f.path, f.kind) for f in listed] == [("d", "dir"), ("d/e", "dir"),
                                                      ("d/e/x.bin", "file")]
        assert listed[2] == FileInfo("d/e/x.bin", "file", len(data))
        assert [f.path for f in session.list_files("d")] == ["e", "e/x.bin"]
        after = cell(session, "sorted(name for name in globals() if not name.startswith('__'))")
    # The reading cells left the session's names as they were; they counted as cells.
    assert after.value == "['kept', 'os']" and after.cell == 7


def test_read_file_and_list_files_errors():
    with pysandbox.Session() as session:
        cell(session, "open('big', 'wb').write(b'x' * 100)\nimport os\nos.mkdir('d')")
        with pytest.raises(FileNotFoundError, match="nope"):
            session.read_file("nope")
        with pytest.raises(IsADirectoryError):
            session.read_file("d")
        with pytest.raises(ValueError, match="100 bytes, more than read_file's max_bytes=99"):
            session.read_file("big", max_bytes=99)
        with pytest.raises(NotADirectoryError):
            session.list_files("big")
        with pytest.raises(ValueError, match="more than list_files' max_entries=1"):
            session.list_files(max_entries=1)
        with pytest.raises(ValueError, match="non-empty string"):
            session.read_file("")
        # Code that took over what the reading cell uses: its answer does not match the digest.
        cell(session, "import base64\nbase64.b64encode = lambda data: b'AAAA'")
        with pytest.raises(SandboxError, match="does not match its digest"):
            session.read_file("big")
        assert cell(session, "1").sandbox == 1  # the session goes on


def test_read_file_is_bounded_by_the_output_limit():
    with pysandbox.Session(profile="strict") as session:  # 1 MiB output limit
        cell(session, "open('large', 'wb').write(b'x' * (1 << 20))")
        with pytest.raises(SandboxError, match="output limit"):
            session.read_file("large")


def test_callbacks_stream_a_cell_s_output():
    out, err, mine = [], [], []
    with pysandbox.Session(on_stdout=out.append, on_stderr=err.append) as session:
        result = cell(session, "import sys\nprint('a', flush=True)\n"
                               "print('b', file=sys.stderr)\n6 * 7")
        own = cell(session, "print('c')", on_stdout=mine.append)
    assert result.value == "42" and ("".join(out), "".join(err)) == ("a\n", "b\n")
    assert "".join(mine) == "c\n" == own.stdout and "".join(out) == "a\n"


def test_an_interrupted_cell_ends_the_session_at_once():
    class Stop(Exception):
        pass

    def on_stdout(text: str) -> None:
        raise Stop(text)

    session = pysandbox.Session(timeout="90s")
    process = session._process
    assert cell(session, "1").ok
    sandbox = descendants(process.pid)
    began = time.monotonic()
    try:
        with pytest.raises(Stop, match="started"):
            session.run("print('started', flush=True)\nimport time\ntime.sleep(60)",
                        on_stdout=on_stdout)
    finally:
        closed = session.closed
        session.close()
    assert time.monotonic() - began < 30 and closed
    assert sandbox and not gone(sandbox)
    with pytest.raises(SandboxError, match="closed"):
        session.run("1")


def test_a_keyboard_interrupt_while_a_cell_runs_ends_the_session(monkeypatch):
    session = pysandbox.Session(timeout="90s")
    process = session._process
    assert cell(session, "1").ok
    sandbox = descendants(process.pid)

    class Interrupted:
        """The session's stdout, where a KeyboardInterrupt arrives while the cell sleeps."""

        def readline(self):
            raise KeyboardInterrupt

        def close(self):
            real.close()

    real = process.stdout
    monkeypatch.setattr(process, "stdout", Interrupted())
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        session.run("import time\ntime.sleep(60)")
    assert time.monotonic() - began < 30 and session.closed
    assert process.returncode == 128 + 15  # SIGTERM: it ended at once, the cell answered
    assert sandbox and not gone(sandbox)
    assert not descendants(process.pid)
