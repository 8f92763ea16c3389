#!/usr/bin/env python3
"""Run one unittest module of the integration suite; strict about outcomes.

    python3 tests/integration/run_suite.py tests/integration/test_basics.py

Exits 0 only if at least one test ran and every test passed. Failures, errors
(including errors in setUpClass/setUpModule), skips, expected failures and
unexpected successes all count as failed: a test that cannot run must fail CI.
The last line printed is ``N passed, N failed``.
"""

from __future__ import annotations

import importlib.util
import sys
import unittest
from pathlib import Path


class StrictResult(unittest.TextTestResult):
    """Records one outcome per test (or per fixture that errored)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.passed: list[str] = []
        self.not_passed: list[tuple[str, str]] = []

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed.append(test.id())

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.not_passed.append((test.id(), "FAIL"))

    def addError(self, test, err):
        super().addError(test, err)
        self.not_passed.append((test.id(), "ERROR"))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.not_passed.append((test.id(), f"SKIPPED ({reason})"))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.not_passed.append((test.id(), "EXPECTED FAILURE"))

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.not_passed.append((test.id(), "UNEXPECTED SUCCESS"))

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            kind = "FAIL" if issubclass(err[0], test.failureException) else "ERROR"
            self.not_passed.append((subtest.id(), kind))


def load_module(path: Path):
    sys.path.insert(0, str(path.parent))  # so the module can import harness
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"run_suite: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} TEST_MODULE.py", file=sys.stderr)
        return 2
    path = Path(argv[1]).resolve()
    try:
        module = load_module(path)
    except Exception as exc:  # an import error is a failed suite, not a crash
        print(f"run_suite: importing {path} failed: {exc!r}", file=sys.stderr)
        print("0 passed, 1 failed")
        return 1

    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2, resultclass=StrictResult)
    result = runner.run(suite)

    # A test whose subtests failed must not also count as passed.
    failed_ids = {name.split(" ")[0] for name, _ in result.not_passed}
    passed = [name for name in result.passed if name not in failed_ids]
    # Tests that never ran (a setUpClass error) count as failed, and so does any
    # fixture error after all tests passed (a tearDownClass error).
    failed = max(suite.countTestCases() - len(passed), len(result.not_passed))
    if result.not_passed:
        print("\nnot passed:", file=sys.stderr)
        for name, kind in result.not_passed:
            print(f"  {kind}: {name}", file=sys.stderr)
    if not passed and not failed:
        print("run_suite: no tests ran", file=sys.stderr)
        failed = 1
    print(f"{len(passed)} passed, {failed} failed")
    sys.stdout.flush()
    return 0 if failed == 0 and passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
