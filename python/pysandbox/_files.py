"""``read_file`` and ``list_files`` of a session: cells that the driver runs inside the sandbox,
so that what they return is the sandbox's file as the session's code sees it, never a host copy.

Each is one cell. Its function writes the answer, base64, on file descriptor 1 (so the answer is
bounded by the profile's output limit, not by the 64 KiB of a cell's value) and returns its
length and SHA-256 as the cell's value; the host takes the answer only when both agree, so that
output from the session's own threads in the meantime is an error, not a corrupt file. The
function is taken out of the namespace as it is called: the session's variables are untouched.
The cell counts as a cell (its number, and ``--output-dir``'s ``cell-N``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass

from ._errors import SandboxError
from ._result import Result, Status

READ_LIMIT = 4 << 20
"""``read_file``'s default ``max_bytes``: 4 MiB, whose base64 fits the first half of the
default profile's 16 MiB output limit (what passes before output is cut)."""

LIST_LIMIT = 10_000
"""``list_files``' default ``max_entries``."""

_NAME = "__pysandbox_transfer"

_SEND = f'''
def {_NAME}(data):
    import base64, hashlib, os
    encoded = base64.b64encode(data)
    while encoded:
        encoded = encoded[os.write(1, encoded):]
    return "%d %s" % (len(data), hashlib.sha256(data).hexdigest())
'''

_READ = '''
def {name}_read(path, limit, send):
    import os, stat
    with open(path, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise IsADirectoryError("%s is not a regular file" % path)
        if info.st_size > limit:
            raise ValueError("%s is %d bytes, more than read_file's max_bytes=%d"
                             % (path, info.st_size, limit))
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError("%s grew to more than read_file's max_bytes=%d" % (path, limit))
    return send(data)
globals().pop("{name}_read")({path!r}, {limit!r}, globals().pop("{name}"))
'''

_LIST = '''
def {name}_list(top, limit, send):
    import json, os, stat
    entries = []
    def walk(directory, prefix):
        with os.scandir(directory) as it:
            for entry in sorted(it, key=lambda e: e.name):
                info = entry.stat(follow_symlinks=False)
                kind = ("dir" if stat.S_ISDIR(info.st_mode) else
                        "file" if stat.S_ISREG(info.st_mode) else
                        "symlink" if stat.S_ISLNK(info.st_mode) else "other")
                if len(entries) == limit:
                    raise ValueError("%s holds more than list_files' max_entries=%d"
                                     % (top, limit))
                entries.append([prefix + entry.name, kind, info.st_size])
                if kind == "dir":
                    walk(entry.path, prefix + entry.name + "/")
    walk(top, "")
    return send(json.dumps(entries).encode())
globals().pop("{name}_list")({path!r}, {limit!r}, globals().pop("{name}"))
'''


@dataclass(frozen=True)
class FileInfo:
    """One entry under the directory :meth:`Session.list_files` listed."""

    path: str
    """Relative to that directory, '/'-separated."""
    kind: str
    """``"file"``, ``"dir"``, ``"symlink"`` (not followed) or ``"other"``."""
    size: int
    """In bytes, as ``lstat`` gives it."""


def read_cell(path: str, max_bytes: int) -> str:
    """The cell that sends the file at ``path`` (relative to the interpreter's working
    directory, /tmp/work unless the session's code changed it)."""
    return _SEND + _READ.format(name=_NAME, path=_checked_path(path), limit=_limit(max_bytes))


def list_cell(path: str, max_entries: int) -> str:
    """The cell that sends the tree under ``path``."""
    return _SEND + _LIST.format(name=_NAME, path=_checked_path(path), limit=_limit(max_entries))


def _checked_path(path: str) -> str:
    if not isinstance(path, str) or not path or "\0" in path:
        raise ValueError(f"a path in the sandbox is a non-empty string, not {path!r}")
    return path


def _limit(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a limit is a number, 0 or more, not {value!r}")
    return value


_VALUE = re.compile(r"'(\d+) ([0-9a-f]{64})'")
_ERRORS: dict[str, type[Exception]] = {
    "FileNotFoundError": FileNotFoundError, "IsADirectoryError": IsADirectoryError,
    "NotADirectoryError": NotADirectoryError, "PermissionError": PermissionError,
    "ValueError": ValueError,
}


def received(result: Result, what: str) -> bytes:
    """The answer of a read or list cell, checked; its errors raised as the same exception
    type (FileNotFoundError, ValueError for a limit...), or SandboxError."""
    if result.status is Status.EXCEPTION and result.exception is not None:
        error = _ERRORS.get(result.exception.type)
        if error is not None:
            raise error(result.exception.message)
    if not result.ok:
        said = result.exception.summary if result.exception else result.message or ""
        raise SandboxError(f"{what} failed in the sandbox ({result.status}): {said}",
                           result=result)
    match = _VALUE.fullmatch(result.value or "")
    if match is None or result.encoding.stdout != "utf-8" or result.truncated.stdout:
        limit = "; it was cut at the profile's output limit" if result.truncated.stdout else ""
        raise SandboxError(f"{what} got no answer it can trust from the sandbox{limit}",
                           result=result)
    try:
        data = base64.b64decode(result.stdout, validate=True)
    except ValueError:
        data = b""
    if len(data) != int(match[1]) or hashlib.sha256(data).hexdigest() != match[2]:
        raise SandboxError(f"{what}: the data sent does not match its digest (did the "
                           f"session's own code write to stdout meanwhile?)", result=result)
    return data


def file_infos(data: bytes) -> list[FileInfo]:
    return [FileInfo(str(path), str(kind), int(size)) for path, kind, size in json.loads(data)]
