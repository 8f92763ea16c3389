"""Temporary directories and files the sandbox's caller (nobody) can read, markers, secrets,
and the cleanups that remove them.

Cleanups run at exit, last registered first; a runner that leaves with os._exit (the attack
suite's verdict) calls run_cleanups() itself first.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from pathlib import Path

# Prefixes of the scratch directories in /tmp and /dev/shm that tests make, never a run: a
# leftover check skips them. The other suites' own are here too, since ctest -j may run them
# meanwhile, and the scratch directory of an MCP server the MCP suite is running.
INTEGRATION_PREFIX = "pysandbox-it-"
ATTACK_PREFIX = "pysandbox-attack-"
TEST_HELPER_PREFIXES = (INTEGRATION_PREFIX, "pysandbox-unit-", ATTACK_PREFIX, "pysandbox-ipc-",
                        "pysandbox-stdlib-", "pysandbox-python-", "pysandbox-install-",
                        "pysandbox-gendocs-", "pysandbox-completion-", "pysandbox-mcp-",
                        "pysandbox-setup-", "pysandbox-kernel-test-", "pysandbox-apparmor-",
                        "pysandbox-deb-", "pysandbox-batch-test-")

_cleanups: list = []


def at_cleanup(fn) -> None:
    """Call ``fn()`` at exit (or at run_cleanups()); what it raises is ignored."""
    _cleanups.append(fn)


def run_cleanups() -> None:
    while _cleanups:
        fn = _cleanups.pop()
        try:
            fn()
        except Exception:
            pass


atexit.register(run_cleanups)


def remove(path: str) -> None:
    """Remove a file, link or directory tree; nothing when it is gone already."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass


def temp_dir(mode: int = 0o755, *, parent: str = "/tmp", owner: int | None = None,
             prefix: str = INTEGRATION_PREFIX) -> Path:
    """A fresh directory under ``parent`` (readable by the unprivileged caller with the default
    ``mode``), owned by ``owner`` when given; removed at exit."""
    path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    os.chmod(path, mode)
    if owner is not None:
        os.chown(path, owner, owner)
    at_cleanup(lambda: remove(path))
    return Path(path)


def write_file(path: Path | str, data: str | bytes, mode: int = 0o644,
               owner: int | None = None) -> Path:
    path = Path(path)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    os.chmod(path, mode)
    if owner is not None:
        os.chown(path, owner, owner)
    return path


def new_marker(prefix: str = "pysandbox-marker-") -> str:
    """A unique token that, passed as a script argument (or put on a command line another way),
    tags every process of one run."""
    return f"{prefix}{uuid.uuid4().hex}"


def new_secret(tag: str = "SECRET") -> str:
    return f"{tag}-{uuid.uuid4().hex}"


def shared_dir(parent: str = "/tmp", mode: int = 0o755, owner: int | None = None) -> Path:
    """An attack's fresh directory that uid 65534 can read (scripts live here); removed at
    exit."""
    return temp_dir(mode, parent=parent, owner=owner, prefix=ATTACK_PREFIX)


def private_dir(parent: str = "/tmp") -> Path:
    """An attack's fresh root-only (0700) directory that uid 65534 cannot read; removed at
    exit."""
    return shared_dir(parent, mode=0o700)
