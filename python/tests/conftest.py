"""What the package's tests share: the built binary (``$PYSANDBOX_BINARY``, which ctest sets),
the package from this source tree, and a strict outcome: a test that is skipped, or that cannot
find what it needs, fails."""

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))  # the package under test, before any installed one


@pytest.fixture(scope="session", autouse=True)
def built_binary() -> str:
    """The pysandbox binary under test; every test fails without it."""
    binary = os.environ.get("PYSANDBOX_BINARY")
    if not binary:
        pytest.fail("PYSANDBOX_BINARY must name the built pysandbox (ctest sets it to "
                    "build/bin/pysandbox)")
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        pytest.fail(f"PYSANDBOX_BINARY={binary} is not an executable file")
    return binary


@pytest.fixture
def shared_dir():
    """A directory under /tmp that the sandbox's host user can read (see support.SharedDir)."""
    from support import SharedDir

    directory = SharedDir()
    yield directory
    directory.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skip (or an expected failure) is a failure here: a test that did not run proved
    nothing."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped or hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"not run, which counts as a failure: {report.longrepr}"
