"""PYSANDBOX_WITH_ENV=1: every run of the attack harness mounts a package environment.

A package environment (`pysandbox env create`, `--with-env ID`) is one more mount in the
sandbox: the store's site/ directory bound read-only at /sandbox/.packages, on sys.path. With the
flag, every ``Sandbox`` (support/fronts.py) runs with one, through whichever front, so that each
attack is also tried against a sandbox that has it (the mount must add no hole).

The environment holds one pure-Python package, PROBE, from a wheel made here (the same bytes
every time, support/wheels.py), built into the shared store by ``pysandbox env create
--find-links``: every test process asks for the same request, so the first one builds it and
the others (at once: the store locks a request) find it without running pip. The shared store
is PYSANDBOX_ENV_STORE/shared (ctest makes PYSANDBOX_ENV_STORE a fresh directory in the build
tree for each ctest run, and removes it at the end); it is root's, as the harness is, which
pysandbox trusts for the nobody caller too.

Each run gets its own copy of the environment in a store of its own (PYSANDBOX_ENV_STORE/runs/
MARKER, root's, removed after the run), so that the host can tell what that run did to it:

- the copy's package directory is watched with inotify; a run that ends without the package
  having been opened through it (the script's prologue imports PROBE first thing) did not have
  the environment mounted, and the run misbehaved: the flag cannot silently do nothing;
- every file and directory of the copy (content hash, mode, owner, times, inode) must be as it
  was before the run, and nothing may be added: a change is an escape.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import struct
import subprocess
import uuid
from pathlib import Path

from support.env import BUILD, PYSANDBOX, Verdict
from support.files import at_cleanup, remove, shared_dir
from support.host import tree_state
from support.wheels import make_wheel

FLAG = "PYSANDBOX_WITH_ENV"
WITH_ENV = os.environ.get(FLAG, "") not in ("", "0")
STORE = Path(os.environ.get("PYSANDBOX_ENV_STORE") or BUILD / "security-env-store")
PROBE = "pysandbox_attack_probe"

# What the prologue of every script gets with the flag (support/fronts.py, script_file).
IMPORT_PROBE = f"import {PROBE}  # {FLAG}: the mounted environment's package\n"

_IN_OPEN = 0x20
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)

_shared_id: str | None = None


def _owned_dir(path: Path, owner: int = 0) -> Path:
    """``path`` as a directory only ``owner`` can write: the store's rule."""
    path.mkdir(mode=0o755, exist_ok=True)
    os.chmod(path, 0o755)
    os.chown(path, owner, owner)
    return path


def shared_env() -> str:
    """The ID of the probe environment in the shared store, built there the first time."""
    global _shared_id
    if _shared_id is None:
        if WITH_ENV and os.environ.get(FLAG) != "1":
            raise Verdict(f"{FLAG} must be 1 (or unset), not {os.environ.get(FLAG)!r}")
        _owned_dir(STORE)
        shared = _owned_dir(STORE / "shared")
        house = shared_dir()
        make_wheel(house, PROBE, "1.0", {
            f"{PROBE}/__init__.py": "MOUNTED = True\n",
            f"{PROBE}/data.txt": "the attack suite's probe environment\n",
        })
        made = subprocess.run([PYSANDBOX, "env", "create", "--cache-dir", str(shared),
                               "--find-links", str(house), PROBE],
                              capture_output=True, text=True, timeout=180)
        env_id = made.stdout.strip()
        if made.returncode != 0 or len(env_id) != 64:
            raise Verdict(f"{FLAG}: pysandbox env create failed ({made.returncode}): "
                          f"{made.stderr.strip()[-500:]}")
        _shared_id = env_id
    return _shared_id


def copy_env(store: Path, owner: int = 0) -> str:
    """A copy of the probe environment (shared_env) in a new store ``store``, its directories
    and files ``owner``'s, as `pysandbox env create` run by that user leaves them; its ID."""
    env_id = shared_env()
    _owned_dir(store, owner)
    _owned_dir(store / "envs", owner)
    target = store / "envs" / env_id
    shutil.copytree(STORE / "shared" / "envs" / env_id, target, symlinks=True)
    for path in [target, *target.rglob("*")]:
        os.lchown(path, owner, owner)
    return env_id


class _Inotify:
    """IN_OPEN on some directories (and the files in them), read without blocking."""

    def __init__(self, directories):
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if self.fd < 0:
            raise Verdict(f"inotify_init1: {os.strerror(ctypes.get_errno())}")
        for directory in directories:
            if libc.inotify_add_watch(self.fd, str(directory).encode(), _IN_OPEN) < 0:
                raise Verdict(f"inotify_add_watch({directory}): "
                              f"{os.strerror(ctypes.get_errno())}")
        self.opened: list[str] = []

    def read(self) -> list[str]:
        """What was opened so far (a name, or "." for a watched directory itself)."""
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return self.opened
            offset = 0
            while offset + _EVENT.size <= len(data):
                _, mask, _, length = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size:offset + _EVENT.size + length]
                offset += _EVENT.size + length
                if mask & _IN_OPEN:
                    self.opened.append(name.rstrip(b"\0").decode(errors="replace") or ".")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Mount:
    """The environment of one run: its own copy, the options that mount it, and the checks."""

    def __init__(self, marker: str):
        shared_env()  # makes the store, the first time
        self.store = _owned_dir(STORE / "runs") / f"{marker}-{uuid.uuid4().hex[:8]}"
        at_cleanup(lambda: remove(str(self.store)))
        self.env_id = copy_env(self.store)
        self.site = self.store / "envs" / self.env_id / "site"
        package = self.site / PROBE
        self.before = tree_state(self.store)
        self.watch = _Inotify([package] + [d for d in package.iterdir() if d.is_dir()])
        at_cleanup(self.watch.close)

    def options(self) -> list[str]:
        return ["--with-env", self.env_id, "--cache-dir", str(self.store)]

    def problems(self, script_ran: bool) -> list[tuple[str, str]]:
        """(kind, message), kind "escape" or "misbehaved": what the run did to its environment,
        and, when the script ran (``script_ran``), whether the environment was mounted at all."""
        out = []
        opened = self.watch.read()  # before the host's own reads below
        self.watch.close()
        after = tree_state(self.store)
        changed = sorted(p for p in set(self.before) | set(after)
                         if self.before.get(p) != after.get(p))
        if changed:
            out.append(("escape", "the mounted environment changed on the host: "
                        + ", ".join(os.path.relpath(p, self.store) for p in changed[:6])))
        if script_ran and not opened:
            out.append(("misbehaved", f"{FLAG}: nothing of the environment's package was opened "
                        "during the run, so it was not mounted (or the script never imported "
                        f"{PROBE})"))
        return out
