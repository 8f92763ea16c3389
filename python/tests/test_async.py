"""pysandbox.arun, AsyncSession and abatch against the built binary: the results of the sync
API, several calls at once, and cancellation that leaves no pysandbox process or sandbox
behind (checked on the host, in /proc)."""

import asyncio
import contextlib
import os
import time

import pytest

import pysandbox
from pysandbox import CellResult, SandboxError, Status
from support import checked, descendants, gone, started


def test_arun_returns_the_result_and_value():
    result = checked(asyncio.run(pysandbox.arun("print('side')\n6 * 7", timeout=5)))
    assert (result.status, result.stdout, result.value) == (Status.OK, "side\n", "42")


def test_aruns_run_at_once():
    async def main():
        return await asyncio.gather(*(pysandbox.arun(f"{n} ** 2") for n in range(4)))

    assert [r.value for r in asyncio.run(main())] == ["0", "1", "4", "9"]


def test_arun_raises_as_run_does():
    with pytest.raises(SandboxError, match='profile "no-such-profile" not found'):
        asyncio.run(pysandbox.arun("1", profile="no-such-profile"))
    with pytest.raises(SandboxError, match="cannot run"):
        asyncio.run(pysandbox.arun("1", binary="/nonexistent/pysandbox"))


def test_arun_output_dir(shared_dir):
    target = shared_dir.path / "out"
    result = asyncio.run(pysandbox.arun("open('a.txt', 'w').write('hi')", output_dir=target))
    assert result.ok and (target / "a.txt").read_text() == "hi"
    assert list(shared_dir.path.iterdir()) == [target]


async def cancel_when_running(call, below: int, sent=lambda: True) -> tuple[set[int], float]:
    """Starts ``call`` as a task, cancels it once pysandbox and ``below`` processes under it
    run and ``sent()`` holds, and returns the processes it saw and how long the cancellation
    took."""
    mine = os.getpid()
    task = asyncio.ensure_future(call)
    seen = await asyncio.to_thread(started, mine, 1 + below, 30)
    while not sent():
        await asyncio.sleep(0)
    began = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return seen, time.monotonic() - began


def test_cancelling_arun_leaves_nothing_running(shared_dir):
    target = shared_dir.path / "out"
    code = "import time\ntime.sleep(60)"
    seen, took = asyncio.run(cancel_when_running(
        pysandbox.arun(code, timeout=90, output_dir=target), below=2))
    assert took < 30 and seen and not gone(seen)
    assert not descendants(os.getpid())
    assert list(shared_dir.path.iterdir()) == []  # no output, no staging directory


def test_a_timeout_of_the_awaiting_code_stops_arun():
    async def main():
        async with asyncio.timeout(1):  # the sandbox starts well within it, then sleeps
            await pysandbox.arun("import time\ntime.sleep(60)", timeout=90)

    began = time.monotonic()
    with pytest.raises(TimeoutError):
        asyncio.run(main())
    assert time.monotonic() - began < 30
    assert not descendants(os.getpid())


def test_arun_callbacks_stream_and_may_be_coroutines():
    out, err = [], []

    async def on_stderr(text: str) -> None:
        await asyncio.sleep(0)
        err.append(text)

    result = asyncio.run(pysandbox.arun("import sys\nprint('a', flush=True)\n"
                                        "print('b', file=sys.stderr)\n1 + 1",
                                        on_stdout=out.append, on_stderr=on_stderr))
    assert result.value == "2" and ("".join(out), "".join(err)) == ("a\n", "b\n")


def test_async_session_keeps_state_and_reads_files():
    async def main():
        async with pysandbox.AsyncSession() as session:
            first = await session.run("x = 40\nopen('f.txt', 'w').write('made')")
            second = await session.run("x + 2")
            data = await session.read_file("f.txt")
            names = [f.path for f in await session.list_files()]
            return first, second, data, names, session.closed

    first, second, data, names, closed = asyncio.run(main())
    assert isinstance(second, CellResult) and checked(second).value == "42"
    assert first.kept and (second.cell, second.sandbox) == (2, 1)
    assert (data, names, closed) == (b"made", ["f.txt"], False)


def test_async_session_refusal_and_closed():
    async def main():
        session = pysandbox.AsyncSession(profile="no-such-profile")
        with pytest.raises(SandboxError, match='profile "no-such-profile" not found'):
            await session.run("1")
        assert session.closed
        with pytest.raises(SandboxError, match="closed"):
            await session.run("1")

    asyncio.run(main())


def test_cancelling_a_cell_ends_the_session_and_leaves_nothing():
    async def main():
        session = pysandbox.AsyncSession(timeout="90s")
        await session.start()
        assert (await session.run("kept = 1")).ok
        sandbox = descendants(session.pid)
        # Cancelled once the cell's request is on its way (its id taken), as it runs.
        seen, took = await cancel_when_running(session.run("import time\ntime.sleep(60)"),
                                               below=len(sandbox),
                                               sent=lambda: session._next_id == 3)
        assert session.closed
        with pytest.raises(SandboxError, match="closed"):
            await session.run("kept")
        return sandbox | seen, took

    pids, took = asyncio.run(main())
    assert took < 30 and pids and not gone(pids)
    assert not descendants(os.getpid())


def test_async_session_callbacks_stream():
    async def main():
        out = []
        async with pysandbox.AsyncSession(on_stdout=out.append) as session:
            result = await session.run("print('a', flush=True)\nprint('b')")
        return out, result

    out, result = asyncio.run(main())
    assert "".join(out) == "a\nb\n" == result.stdout


def test_abatch_yields_each_job_s_result():
    async def jobs():
        for n in range(5):
            yield {"id": n, "code": f"{n} * 10"}

    async def main():
        return [checked(r) async for r in pysandbox.abatch(jobs(), jobs_at_once=2)]

    results = asyncio.run(main())
    assert sorted((r.id, r.value) for r in results) == [(n, str(n * 10)) for n in range(5)]


def test_abatch_output_dir_and_bad_jobs(shared_dir):
    async def main():
        return [r async for r in pysandbox.abatch(
            ["not json", {"id": "ok", "code": "open('a.txt', 'w').write('x')"}],
            keep_order=True, output_dir=shared_dir.path / "out")]

    bad, good = asyncio.run(main())
    assert bad.status is Status.BAD_REQUEST and good.ok
    assert (shared_dir.path / "out/job-2/a.txt").read_text() == "x"


def test_leaving_abatch_early_or_cancelling_it_stops_the_batch():
    endless = ({"id": n, "code": "print(1)"} for n in range(10_000))

    async def leave_early():
        async with contextlib.aclosing(pysandbox.abatch(endless, jobs_at_once=1)) as results:
            async for result in results:
                assert result.ok
                return descendants(os.getpid())

    running = asyncio.run(leave_early())
    assert running and not gone(running)

    async def consume():
        async for _ in pysandbox.abatch([{"code": "import time\ntime.sleep(60)"}], timeout=90):
            pass

    seen, took = asyncio.run(cancel_when_running(consume(), below=2))
    assert took < 30 and seen and not gone(seen)
    assert not descendants(os.getpid())


def test_closing_an_async_session_ends_it_by_end_of_input():
    async def main():
        async with pysandbox.AsyncSession() as session:
            assert (await session.run("1")).ok
            process = session._process
            sandbox = descendants(session.pid)
        return process.returncode, sandbox, session.closed

    returncode, sandbox, closed = asyncio.run(main())
    assert (returncode, closed) == (0, True)  # not a signal: it ended when stdin did
    assert sandbox and not gone(sandbox)
