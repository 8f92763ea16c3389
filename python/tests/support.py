"""Helpers for the package's tests: results checked against the result schema, and files
the sandbox (which runs as another host user when the tests run as root) can read."""

import importlib.util
import os
import select
import shutil
import tempfile
import time
from pathlib import Path

import pysandbox

REPO = Path(__file__).resolve().parents[2]


def _load_result_schema():
    """tests/support/result_schema.py (Debian's python3-jsonschema), loaded by its path: the
    name ``support`` here is this module, not the black-box suites' package."""
    path = REPO / "tests" / "support" / "result_schema.py"
    spec = importlib.util.spec_from_file_location("result_schema", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


result_schema = _load_result_schema()


def checked(result: pysandbox.Result) -> pysandbox.Result:
    """``result``, once its raw object has passed the result schema."""
    result_schema.validate(result.raw)
    return result


def run(*args, **kwargs) -> pysandbox.Result:
    """pysandbox.run, with the result checked against the schema."""
    return checked(pysandbox.run(*args, **kwargs))


class SharedDir:
    """A fresh directory under /tmp that every user can read, removed by ``close``."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="pysandbox-python-", dir="/tmp"))
        self.path.chmod(0o755)

    def file(self, name: str, text: str) -> Path:
        path = self.path / name
        path.write_text(text)
        path.chmod(0o644)
        return path

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def cmake_version() -> str:
    for line in (REPO / "CMakeLists.txt").read_text().splitlines():
        if line.startswith("project(pysandbox VERSION "):
            return line.split()[2]
    raise AssertionError("CMakeLists.txt has no project(pysandbox VERSION ...) line")



def children(pid: int) -> set[int]:
    """The processes ``pid`` started (of all its threads), or none when it is gone."""
    found = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found.update(int(c) for c in f.read().split())
    except FileNotFoundError:
        return set()
    return found


def descendants(pid: int) -> set[int]:
    """The processes below ``pid`` (children, theirs...), or none when it is gone."""
    below = children(pid)
    return below | {d for c in below for d in descendants(c)}


def exits(pid: int, within: float) -> bool:
    """Whether ``pid`` has ended, or ends within ``within`` seconds (awaited on a pidfd)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], within)[0])
    finally:
        os.close(fd)


def started(pid: int, count: int, within: float) -> set[int]:
    """The processes below ``pid`` once there are at least ``count`` of them (pysandbox, the
    sandbox's init, its interpreter), looked for until ``within`` seconds have passed: a
    process tree that grows sends no notification, so /proc is read again every 10 ms."""
    deadline = time.monotonic() + within
    while len(found := descendants(pid)) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"fewer than {count} processes below {pid} after {within} s: "
                                 f"{sorted(found)}")
        time.sleep(0.01)
    return found


def gone(pids: set[int], within: float = 5) -> list[int]:
    """Those of ``pids`` still running after ``within`` seconds (each awaited on a pidfd)."""
    return [pid for pid in pids if not exits(pid, within)]
