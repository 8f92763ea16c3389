"""Where things are and who runs them.

Environment:
  PYSANDBOX            the binary (default: <build>/bin/pysandbox)
  PYSANDBOX_BUILD_DIR  the build tree (default: <repo>/build)
  PYSANDBOX_AS         ``root``: run the binary as the current user, which must be root;
                       ``nobody``: run it as uid/gid 65534 through setpriv (needs root).
                       Unset: as whoever runs the tests (the attack suite takes it as root).
  PYSANDBOX_SANITIZED  set by ctest for a sanitizer build (see TIME_SLACK_SCALE)
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("PYSANDBOX_BUILD_DIR", REPO / "build"))
PYSANDBOX = os.environ.get("PYSANDBOX", str(BUILD / "bin" / "pysandbox"))
RUN_AS = os.environ.get("PYSANDBOX_AS", "")

NOBODY = 65534            # the host uid/gid of every sandboxed script, and of the nobody caller
SANDBOX_UID = 1000        # what getuid() says inside
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]

# A sanitizer build (ctest sets PYSANDBOX_SANITIZED) starts, runs and exits several times slower.
# That is the instrumentation's cost, not the limits' precision: slack measured around the whole
# process scales with it.
TIME_SLACK_SCALE = 4.0 if os.environ.get("PYSANDBOX_SANITIZED") else 1.0


def command_prefix() -> list[str]:
    """The wrapper that puts the binary in the requested caller identity (PYSANDBOX_AS)."""
    if RUN_AS == "nobody":
        return list(AS_NOBODY)
    if RUN_AS in ("root", ""):
        return []
    raise RuntimeError(f"PYSANDBOX_AS must be 'root' or 'nobody', not {RUN_AS!r}")


def expected_host_uid() -> int:
    """The host uid the sandboxed script must run as."""
    if RUN_AS == "nobody":
        return NOBODY
    euid = os.geteuid()
    # Invoked as root, the script runs as nobody on the host; otherwise as the caller.
    return NOBODY if euid == 0 else euid


def binary_missing() -> str | None:
    """Why PYSANDBOX cannot be run, or None when it can."""
    if os.path.isfile(PYSANDBOX) and os.access(PYSANDBOX, os.X_OK):
        return None
    return f"pysandbox binary not found or not executable: {PYSANDBOX}"


def parse_duration(text: str, default: float = 5.0) -> float:
    """Seconds of a duration as pysandbox takes it ("250ms", "5s", "2m", "3"); ``default`` when
    it does not parse."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)?", text)
    if not m:
        return default
    value = float(m.group(1))
    return value / 1000 if m.group(2) == "ms" else value * 60 if m.group(2) == "m" else value


class Verdict(Exception):
    """The test itself cannot run or judge (not root, the binary missing, a test bug): an error,
    never a finding about pysandbox."""
