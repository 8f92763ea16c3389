"""pysandbox.Session against the built binary: one interpreter across cells, a timeout that
keeps or loses the state, bad requests as results, pysandbox's own failures as SandboxError,
and nothing left running after close."""

import pytest

import pysandbox
from pysandbox import CellResult, SandboxError, Status
from support import checked, descendants, exits


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

