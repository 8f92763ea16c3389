"""The integration suite's own helpers, on top of the test support package (tests/support).

The tests drive the built binary and judge the outcome from the host side: exit
status, bytes on the pipes, timing, and what the host can see in ``/proc`` and
on its own filesystem. What a probe script claims about itself is at most
secondary evidence.

What every suite shares (finding the binary, running it as PYSANDBOX_AS says, Result and
Running, the result schema, temp dirs, /proc) is tests/support's, re-exported here under the
names the test modules import; this file keeps what is the integration suite's: probe scripts
and their REPORT line, profiles, markers, modules a test needs inside, and SandboxTestCase.

Environment: see tests/support/env.py (PYSANDBOX, PYSANDBOX_AS).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import unittest
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the support package
from support import result_schema  # noqa: E402
from support.env import (AS_NOBODY, NOBODY, PYSANDBOX, REPO, RUN_AS, SANDBOX_UID,  # noqa: E402
                         TIME_SLACK_SCALE, binary_missing, command_prefix, expected_host_uid)
from support.files import (TEST_HELPER_PREFIXES, new_marker, new_secret, temp_dir,  # noqa: E402
                           write_file)
from support.host import landlock_abi  # noqa: E402
from support.procfs import marker_pids, sandboxed_python_pid, settle  # noqa: E402
from support.procfs import status as proc_status  # noqa: E402
from support.running import Result, Running, run  # noqa: E402

# The names the test modules import from here.
__all__ = [
    "AS_NOBODY", "LIVE_TIMEOUT", "NOBODY_GID", "NOBODY_UID", "PYSANDBOX", "REPO", "REPORT_HELPER",
    "RUN_AS", "Result", "Running", "SANDBOX_PYTHON", "SANDBOX_UID", "SandboxTestCase",
    "TEST_HELPER_PREFIXES", "TIME_SLACK_SCALE", "WAIT_FOR_HOST", "check_environment",
    "command_prefix", "expected_host_uid", "jobs_file", "landlock_abi", "leftovers",
    "marked_profile",
    "new_marker", "new_secret", "parse_report", "preload_marker", "preload_module_profile",
    "probe_script", "proc_status",
    "profile", "require_modules", "result_schema", "run", "sandboxed_python_pid", "script",
    "temp_dir", "wait_for_no_leftovers", "write_file",
]

NOBODY_UID = NOBODY
NOBODY_GID = NOBODY
LIVE_TIMEOUT = "20s"  # wall-clock limit for probes the host inspects while they run


# The Debian package of each Python module the data-science tests need.
DEBIAN_PACKAGE = {"numpy": "python3-numpy", "pandas": "python3-pandas",
                  "matplotlib": "python3-matplotlib"}
SANDBOX_PYTHON = "/usr/bin/python3"  # the shipped profiles' [python] interpreter


def require_modules(*names: str) -> None:
    """Raise AssertionError (never skip) unless the sandbox's interpreter can import every
    module in ``names``. A test that needs numpy, pandas or matplotlib must fail where they are
    missing, saying so, instead of passing without having tested anything."""
    if not names:
        return
    code = ("import importlib.util, sys\n"
            "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))")
    proc = subprocess.run([SANDBOX_PYTHON, "-c", code, *names], capture_output=True, text=True,
                          timeout=60)
    missing = proc.stdout.split() if proc.returncode == 0 else list(names)
    if missing:
        packages = " ".join(DEBIAN_PACKAGE.get(m, m) for m in missing)
        raise AssertionError(f"{SANDBOX_PYTHON} cannot import {', '.join(missing)}: this test "
                             f"needs them and fails without them (apt-get install {packages})"
                             + (f"; {proc.stderr.strip()}" if proc.returncode else ""))


def check_environment() -> None:
    """Raise AssertionError (never skip) when the suite cannot be run meaningfully."""
    command_prefix()  # validates PYSANDBOX_AS
    if RUN_AS in ("root", "nobody") and os.geteuid() != 0:
        raise AssertionError(f"PYSANDBOX_AS={RUN_AS} needs the tests to run as root")
    if missing := binary_missing():
        raise AssertionError(missing)


# --------------------------------------------------------------------------- files


def script(text: str, name: str = "probe.py", directory: Path | None = None) -> Path:
    """Write a (dedented) Python script into a fresh directory readable by nobody."""
    directory = directory or temp_dir()
    return write_file(directory / name, textwrap.dedent(text).lstrip())


def profile(text: str, name: str = "profile.toml") -> Path:
    """Write a TOML profile (dedented) into a fresh directory; return its absolute path."""
    return script(text, name=name)


def preload_marker() -> str:
    """A marker that is also a module name: put in a profile's [python] preload (marked_profile),
    it tags the command lines of every sandbox that profile starts ahead of its job, and of a
    zygote and each job it forks, where the marker as a script argument cannot go."""
    return new_marker().replace("-", "_")


def marked_profile(marker: str, base: str = "default", extra: str = "") -> Path:
    """The profile `base` with `extra` TOML and `marker` as its [python] preload (a module that
    does not exist: each sandbox warns, and runs)."""
    return profile(f'extends = "{base}"\n{extra}\n[python]\npreload = ["{marker}"]\n',
                   name=f"{marker}.toml")


# The default profile's filesystem.ro: a profile that adds a path lists them all (a list replaces
# the one it extends).
DEFAULT_RO = ("/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc/ld.so.cache", "/etc/localtime",
              "/etc/alternatives")


def preload_module_profile(module: str, source: str, extra: str = "") -> Path:
    """The profile default with `extra` TOML and a module of the test's, named `module` (a
    marker, as preload_marker makes: it tags the command lines as marked_profile's does) and made
    of `source`, as its [python] preload: mounted read-only and on PYTHONPATH."""
    modules = temp_dir(parent="/var/tmp")  # under /tmp the sandbox's own would hide it
    write_file(modules / f"{module}.py", source)
    ro = ", ".join(f'"{path}"' for path in (*DEFAULT_RO, modules))
    return profile(f'extends = "default"\n{textwrap.dedent(extra)}\n'
                   f'[filesystem]\nro = [{ro}]\n[env.set]\nPYTHONPATH = "{modules}"\n'
                   f'[python]\npreload = ["{module}"]\n', name=f"{module}.toml")


def jobs_file(jobs) -> Path:
    """A batch's JSON-lines jobs file, readable by nobody."""
    return script("".join(json.dumps(job) + "\n" for job in jobs), name="jobs.jsonl")


# --------------------------------------------------------------------------- /proc


def leftovers(marker: str) -> list[int]:
    """Host pids of live processes (other than this one) with ``marker`` as an argument."""
    return marker_pids(marker, whole_arg=True)


def wait_for_no_leftovers(marker: str, grace: float) -> list[int]:
    """Poll up to ``grace`` seconds for the marker's processes to be gone; return survivors."""
    return settle(lambda: leftovers(marker), grace)


# --------------------------------------------------------------------------- probes


def parse_report(stdout: bytes):
    """Decode the ``REPORT <json>`` line a probe printed (see REPORT_HELPER)."""
    for line in stdout.splitlines():
        if line.startswith(b"REPORT "):
            return json.loads(line[len(b"REPORT "):])
    raise AssertionError(f"the probe printed no REPORT line; stdout {stdout!r}")


# Prepend to a probe body to get report(obj): one JSON line the test can parse.
REPORT_HELPER = """
import json as _json
def report(obj):
    print("REPORT " + _json.dumps(obj), flush=True)
"""

def probe_script(body: str, directory: Path | None = None) -> Path:
    """A script made of REPORT_HELPER followed by ``body`` (dedented)."""
    return script(REPORT_HELPER + textwrap.dedent(body), directory=directory)


# A probe body usable with Running: print ready, wait for stdin EOF.
WAIT_FOR_HOST = """
import sys
print("ready", flush=True)
sys.stdin.read()
"""


# --------------------------------------------------------------------------- base class


class SandboxTestCase(unittest.TestCase):
    """Fails (never skips) when the binary or the requested mode is unavailable."""

    maxDiff = None
    # Python modules every test of the class needs inside the sandbox (see require_modules).
    NEEDS_MODULES: tuple[str, ...] = ()

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        check_environment()
        require_modules(*cls.NEEDS_MODULES)

    def setUp(self) -> None:
        self.marker = new_marker()
        # Registered first, so it runs after every other cleanup (they run last-in first-out).
        self.addCleanup(self._check_leftovers)

    def _check_leftovers(self) -> None:
        # Every test must leave nothing behind, whatever it checked. Tests that care about
        # the exact moment check leftovers() themselves; this is the safety net.
        survivors = wait_for_no_leftovers(self.marker, grace=1.0)
        for pid in survivors:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.assertEqual(survivors, [], "processes carrying the test's marker outlived the run")

    def run_script(self, body: str, *args: str, options: Sequence[str] = (),
                   directory: Path | None = None, **kwargs) -> Result:
        """Write ``body`` to a script and run it with the marker as its first argument.

        The script can call ``report(obj)`` (see REPORT_HELPER) to hand back data.
        """
        path = probe_script(body, directory)
        return run(["run", *options, path, "--", self.marker, *args], **kwargs)

    def running(self, body: str, *args: str, options: Sequence[str] = (),
                directory: Path | None = None, **kwargs) -> Running:
        """Like run_script, but in the background (see Running).

        Unless the test sets one, the wall-clock limit is raised to LIVE_TIMEOUT so a
        slow host-side inspection cannot race the default limit.
        """
        path = probe_script(body, directory)
        if "--timeout" not in options:
            options = ["--timeout", LIVE_TIMEOUT, *options]
        return Running(["run", *options, path, "--", self.marker, *args],
                       marker=self.marker, **kwargs)

    def assertExit(self, result: Result, code: int) -> None:
        self.assertEqual(result.returncode, code, result.describe())
