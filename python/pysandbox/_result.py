"""The result object (schema ``pysandbox.result/v1``) as typed, frozen dataclasses.

Field by field as pysandbox(1), section JSON RESULT, documents it and
``schema/pysandbox.result.v1.json`` specifies it. Fields a result may lack (a ``bad_request``
has only schema, version, status, id and message, an ``install_error`` those and what pip said;
the session, MCP, batch and Dask fields are optional) read as None, empty or zero.
"""

from __future__ import annotations

import base64
import builtins
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Self, TypeVar

from ._errors import SandboxError

SCHEMA = "pysandbox.result/v1"

T = TypeVar("T")


class Status(enum.StrEnum):
    """How a request ended; callers switch on it, not on exit codes. A str, so
    ``result.status == "ok"`` holds too."""

    OK = "ok"
    """The script exited with status 0 and its output is complete."""
    ERROR = "error"
    """A non-zero exit status without an uncaught exception."""
    EXCEPTION = "exception"
    """An uncaught Python exception (SyntaxError included): see ``Result.exception``."""
    TIMEOUT = "timeout"
    """The wall-clock limit."""
    MEMORY_LIMIT = "memory_limit"
    """The memory limit."""
    CPU_LIMIT = "cpu_limit"
    """The CPU-time limit."""
    OUTPUT_LIMIT = "output_limit"
    """The output went over its cap and was cut in the middle."""
    KILLED = "killed"
    """A signal that no limit explains, or pysandbox was interrupted."""
    POLICY_VIOLATION = "policy_violation"
    """A denied system call ended the run, or the script failed after the policy refused
    an import or a call."""
    SANDBOX_ERROR = "sandbox_error"
    """The sandbox could not be set up or the interpreter not started: the code did not run."""
    BAD_REQUEST = "bad_request"
    """The request itself could not be run (a bad batch line); ``message`` says why."""
    INSTALL_ERROR = "install_error"
    """The packages the run asked for (a profile's ``[python] requirements``, a script's
    inline metadata) could not be installed; ``message`` names the package. The code did not
    run."""


@dataclass(frozen=True)
class Streams(Generic[T]):
    """One value for each of the script's two output streams."""

    stdout: T
    stderr: T


@dataclass(frozen=True)
class PythonException:
    """The uncaught exception that ended the script."""

    type: str
    """E.g. ``"ZeroDivisionError"``, ``"json.decoder.JSONDecodeError"``."""
    message: str
    """May span lines; empty for a bare ``raise E()``."""
    line: int | None
    """The script's line it was raised on (or of the deepest call in the script)."""
    traceback: str
    """As Python printed it, without the sandbox's own frames."""
    summary: str
    """One line: ``"ZeroDivisionError: division by zero (line 4)"``."""
    hint: str | None
    """What to change when the sandbox is the likely cause (a missing module, a full /tmp)."""


@dataclass(frozen=True)
class Violation:
    """An action the sandbox blocked (counted outside the sandbox, or by the audit hook)."""

    kind: str
    """``"syscall"``, ``"network"``, ``"import"``, ``"call"``, ``"resource"`` or ``"channel"``
    (a cell that flooded the driver's channel)."""
    what: str
    """The system call, ``"host:port"``, module, denied call, limit (``"wall_time"``...), or
    ``"driver_channel"``."""
    count: int
    action: str
    """``"denied"``, ``"killed"``, ``"truncated"``, ``"interrupted"`` (a session's cell that a
    limit stopped while the sandbox went on), or ``"dropped"`` (what the cell sent on the
    driver's channel past its budget was not read)."""


@dataclass(frozen=True)
class Artifact:
    """A regular file the run created or changed under /tmp/work."""

    path: str
    """Relative to /tmp/work."""
    size: int
    sha256: str | None
    """None when the file was too large, or past the total or time the collection allows."""
    media_type: str
    host_path: str | None
    """Where ``--output-dir`` copied it, else None."""
    skipped: str | None
    """Why ``--output-dir`` did not copy it (``"exists"``, ``"too_large"``...), else None."""


@dataclass(frozen=True)
class SyscallCount:
    """With ``--trace-syscalls``: one system call the script made, and the profile's answer."""

    name: str
    count: int
    verdict: str
    """``"allowed"``, ``"denied"``, ``"killed"`` or ``"errno ENAME"``."""


@dataclass(frozen=True)
class Usage:
    """What the run cost, in milliseconds and KiB."""

    wall_ms: int
    cpu_ms: int
    max_rss_kib: int
    setup_ms: int
    """The sandbox's own overhead, from clone to the interpreter's start."""
    collect_ms: int
    """After the run: the --workdir copy, the artifacts' hashes and copies."""


@dataclass(frozen=True)
class Limits:
    """The limits in effect after the profile and the options."""

    wall_time_ms: int
    cpu_time_ms: int
    memory_bytes: int
    max_procs: int
    open_files: int
    file_size_bytes: int
    tmp_size_bytes: int
    output_limit_bytes: int
    cpus: int
    network: str
    """``"none"``, ``"loopback"`` or ``"proxy"``."""


@dataclass(frozen=True)
class Gvisor:
    """Under gVisor (``Enforcement.kernel == "gvisor"``): what answered the script's calls."""

    runsc: str
    """The runsc executable that ran the sandbox."""
    platform: str
    """How gVisor intercepted the script's calls: ``"ptrace"``, ``"kvm"`` or ``"systrap"``."""
    inside: tuple[str, ...]
    """The layers gVisor enforced on the script (its seccomp among them)."""
    around_runsc: tuple[str, ...]
    """The layers the host kernel still put around runsc itself."""


@dataclass(frozen=True)
class Enforcement:
    """The isolation layers that were in force."""

    namespaces: tuple[str, ...]
    seccomp: str
    """What a denied system call gets: ``"errno"`` or ``"kill"``."""
    landlock: int | None
    """The Landlock ABI in force, or None where the kernel has none (JSON ``false``)."""
    landlock_rights: tuple[str, ...]
    """What Landlock handled: ``"fs"``, ``"ioctl_dev"`` (device ioctls), ``"tcp"`` (TCP bind
    and connect, under network none and proxy), ``"scopes"`` (abstract UNIX sockets and
    signals leaving the sandbox); empty without Landlock."""
    no_new_privs: bool
    capabilities: tuple[str, ...]
    resources: str
    """What enforced memory and processes: ``"cgroup"`` or ``"rlimit"``."""
    audit_hook: str
    """``"installed"``, ``"not confirmed"`` or ``"off"``."""
    host_uid: int
    degraded: tuple[str, ...]
    """The optional layers that were not in force: ``"landlock"``, ``"cgroup"``, ``"audit_hook"``."""
    kernel: str = "host"
    """Which kernel answered the script's system calls: ``"host"`` or ``"gvisor"`` (the
    profile's ``sandbox.kernel``, or ``kernel=``)."""
    gvisor: Gvisor | None = None
    """What gVisor enforced, under ``kernel == "gvisor"``; None on the host kernel."""


@dataclass(frozen=True)
class Error:
    """For status ``sandbox_error``: what failed."""

    message: str
    step: str | None
    """The setup step that failed, ``"execve"``, ``"worker"`` (pysandbox.dask: the worker's warm
    pysandbox ended before the job's result), or None before a sandbox existed."""
    errno: int | None


@dataclass(frozen=True)
class Figure:
    """A figure the code showed (sessions, MCP)."""

    media_type: str
    data: str
    """The image, base64."""

    @property
    def png(self) -> builtins.bytes:
        """The image's bytes."""
        return base64.b64decode(self.data, validate=True)


@dataclass(frozen=True)
class Result:
    """One ``pysandbox.result/v1`` object: how a request ended and everything it produced.

    ``raw`` is the object as pysandbox wrote it, fields this version does not know included.
    """

    schema: str
    version: str
    status: Status
    exit_code: int | None
    """The script's exit status, or None when it did not exit on its own."""
    signal: str | None
    """The signal that ended the script (``"SIGKILL"``), or None."""
    pysandbox_exit_code: int | None
    """The exit status pysandbox itself returned."""
    message: str | None
    """The line pysandbox prints when the sandbox stopped something, or None."""
    stdout: str
    """What the script wrote, as text, or base64 where ``encoding.stdout == "base64"``
    (``stdout_bytes`` decodes either)."""
    stderr: str
    encoding: Streams[str]
    """``"utf-8"`` or ``"base64"``, for each of stdout and stderr."""
    output: tuple[tuple[str, int], ...]
    """``(stream, length)`` pairs: both streams' kept bytes in the order they arrived."""
    truncated: Streams[bool]
    bytes: Streams[int]
    """How many bytes the script wrote to each stream, kept or not."""
    exception: PythonException | None
    violations: tuple[Violation, ...]
    files: tuple[Artifact, ...]
    files_omitted: int
    syscalls: tuple[SyscallCount, ...] | None
    usage: Usage | None
    limits: Limits | None
    enforcement: Enforcement | None
    profile: str | None
    error: Error | None
    warnings: tuple[str, ...]
    id: Any = None
    """The request's id (sessions, MCP, batch), any JSON value."""
    value: str | None = None
    """Sessions: the repr of the cell's final expression, or None."""
    figures: tuple[Figure, ...] = ()
    state: str | None = None
    """Sessions: ``"kept"`` or ``"lost"``."""
    cell: int | None = None
    sandbox: int | None = None
    worker: str | None = None
    """Dask: the worker that ran the job."""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """Whether the status is ``ok``."""
        return self.status is Status.OK

    @property
    def stdout_bytes(self) -> builtins.bytes:
        """What the script wrote to stdout, as bytes, whatever its encoding in the result."""
        return _decode(self.stdout, self.encoding.stdout)

    @property
    def stderr_bytes(self) -> builtins.bytes:
        """What the script wrote to stderr, as bytes."""
        return _decode(self.stderr, self.encoding.stderr)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Self:
        """The result that ``obj`` (a parsed ``pysandbox.result/v1`` object) describes.

        Raises SandboxError when ``obj`` is not such an object (another schema, a status this
        version does not know, a field of the wrong type)."""
        return _read_result(cls, _Fields(obj, "the result"))


def _decode(text: str, encoding: str) -> builtins.bytes:
    if encoding == "base64":
        return base64.b64decode(text, validate=True)
    return text.encode("utf-8", "surrogateescape")


class _Fields:
    """Typed reads of one JSON object. A missing or null field gives the default; a value of
    another type raises SandboxError naming the field."""

    def __init__(self, obj: Any, where: str) -> None:
        if not isinstance(obj, Mapping):
            raise SandboxError(f"{where} is not a JSON object: {obj!r:.200}")
        self.obj: Mapping[str, Any] = obj
        self.where = where

    def _get(self, key: str, kinds: type | tuple[type, ...], what: str) -> Any:
        value = self.obj.get(key)
        # bool is an int to Python, never to JSON.
        if value is not None and (not isinstance(value, kinds) or
                                  (isinstance(value, bool) and bool not in _as_tuple(kinds))):
            raise SandboxError(f"{self.where}: {key} is not {what}: {value!r:.200}")
        return value

    def text(self, key: str, default: str = "") -> str:
        value: str | None = self._get(key, str, "a string")
        return default if value is None else value

    def optional_text(self, key: str) -> str | None:
        value: str | None = self._get(key, str, "a string")
        return value

    def number(self, key: str, default: int = 0) -> int:
        value: int | None = self._get(key, int, "an integer")
        return default if value is None else value

    def optional_number(self, key: str) -> int | None:
        value: int | None = self._get(key, int, "an integer")
        return value

    def flag(self, key: str) -> bool:
        return bool(self._get(key, bool, "true or false"))

    def table(self, key: str) -> _Fields | None:
        value = self._get(key, dict, "an object")
        return None if value is None else _Fields(value, f"{self.where}: {key}")

    def tables(self, key: str) -> list[_Fields]:
        return [_Fields(item, f"{self.where}: {key}[{i}]") for i, item in enumerate(self.items(key))]

    def items(self, key: str) -> list[Any]:
        value: list[Any] | None = self._get(key, list, "an array")
        return [] if value is None else value

    def texts(self, key: str) -> tuple[str, ...]:
        values = self.items(key)
        if not all(isinstance(v, str) for v in values):
            raise SandboxError(f"{self.where}: {key} is not an array of strings: {values!r:.200}")
        return tuple(values)


def _as_tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _status(fields: _Fields) -> Status:
    text = fields.text("status")
    try:
        return Status(text)
    except ValueError:
        raise SandboxError(f"{fields.where}: unknown status {text!r} (a newer pysandbox than "
                           f"this package?)") from None


def _streams_text(fields: _Fields | None) -> Streams[str]:
    if fields is None:
        return Streams("utf-8", "utf-8")
    return Streams(fields.text("stdout", "utf-8"), fields.text("stderr", "utf-8"))


def _streams_flag(fields: _Fields | None) -> Streams[bool]:
    if fields is None:
        return Streams(False, False)
    return Streams(fields.flag("stdout"), fields.flag("stderr"))


def _streams_number(fields: _Fields | None) -> Streams[int]:
    if fields is None:
        return Streams(0, 0)
    return Streams(fields.number("stdout"), fields.number("stderr"))


def _output(fields: _Fields) -> tuple[tuple[str, int], ...]:
    pairs = []
    for pair in fields.items("output"):
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and
                isinstance(pair[1], int) and not isinstance(pair[1], bool)):
            raise SandboxError(f"{fields.where}: output holds {pair!r:.200}, not [stream, length]")
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


def _exception(fields: _Fields | None) -> PythonException | None:
    if fields is None:
        return None
    return PythonException(type=fields.text("type"), message=fields.text("message"),
                           line=fields.optional_number("line"),
                           traceback=fields.text("traceback"), summary=fields.text("summary"),
                           hint=fields.optional_text("hint"))


def _violation(fields: _Fields) -> Violation:
    return Violation(kind=fields.text("kind"), what=fields.text("what"),
                     count=fields.number("count"), action=fields.text("action"))


def _artifact(fields: _Fields) -> Artifact:
    return Artifact(path=fields.text("path"), size=fields.number("size"),
                    sha256=fields.optional_text("sha256"), media_type=fields.text("media_type"),
                    host_path=fields.optional_text("host_path"),
                    skipped=fields.optional_text("skipped"))


def _syscalls(fields: _Fields) -> tuple[SyscallCount, ...] | None:
    if fields.obj.get("syscalls") is None:
        return None
    return tuple(SyscallCount(name=call.text("name"), count=call.number("count"),
                              verdict=call.text("verdict")) for call in fields.tables("syscalls"))


def _usage(fields: _Fields | None) -> Usage | None:
    if fields is None:
        return None
    return Usage(wall_ms=fields.number("wall_ms"), cpu_ms=fields.number("cpu_ms"),
                 max_rss_kib=fields.number("max_rss_kib"), setup_ms=fields.number("setup_ms"),
                 collect_ms=fields.number("collect_ms"))


def _limits(fields: _Fields | None) -> Limits | None:
    if fields is None:
        return None
    return Limits(wall_time_ms=fields.number("wall_time_ms"),
                  cpu_time_ms=fields.number("cpu_time_ms"),
                  memory_bytes=fields.number("memory_bytes"), max_procs=fields.number("max_procs"),
                  open_files=fields.number("open_files"),
                  file_size_bytes=fields.number("file_size_bytes"),
                  tmp_size_bytes=fields.number("tmp_size_bytes"),
                  output_limit_bytes=fields.number("output_limit_bytes"),
                  cpus=fields.number("cpus"), network=fields.text("network"))


def _enforcement(fields: _Fields | None) -> Enforcement | None:
    if fields is None:
        return None
    return Enforcement(namespaces=fields.texts("namespaces"), seccomp=fields.text("seccomp"),
                       landlock=_landlock(fields),
                       landlock_rights=fields.texts("landlock_rights"),
                       no_new_privs=fields.flag("no_new_privs"),
                       capabilities=fields.texts("capabilities"),
                       resources=fields.text("resources"), audit_hook=fields.text("audit_hook"),
                       host_uid=fields.number("host_uid"), degraded=fields.texts("degraded"),
                       kernel=fields.text("kernel", "host"), gvisor=_gvisor(fields.table("gvisor")))


def _gvisor(fields: _Fields | None) -> Gvisor | None:
    if fields is None:
        return None
    return Gvisor(runsc=fields.text("runsc"), platform=fields.text("platform"),
                  inside=fields.texts("inside"), around_runsc=fields.texts("around_runsc"))


def _landlock(fields: _Fields) -> int | None:
    value = fields.obj.get("landlock")
    if value is None or value is False:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise SandboxError(f"{fields.where}: landlock is neither an ABI number nor false: {value!r}")


def _error(fields: _Fields | None) -> Error | None:
    if fields is None:
        return None
    return Error(message=fields.text("message"), step=fields.optional_text("step"),
                 errno=fields.optional_number("errno"))


def _figure(fields: _Fields) -> Figure:
    return Figure(media_type=fields.text("media_type"), data=fields.text("data"))


R = TypeVar("R", bound=Result)


def _read_result(cls: type[R], fields: _Fields) -> R:
    schema = fields.text("schema")
    if schema != SCHEMA:
        raise SandboxError(f"{fields.where} has schema {schema!r}, not {SCHEMA!r}")
    return cls(
        schema=schema,
        version=fields.text("version"),
        status=_status(fields),
        exit_code=fields.optional_number("exit_code"),
        signal=fields.optional_text("signal"),
        pysandbox_exit_code=fields.optional_number("pysandbox_exit_code"),
        message=fields.optional_text("message"),
        stdout=fields.text("stdout"),
        stderr=fields.text("stderr"),
        encoding=_streams_text(fields.table("encoding")),
        output=_output(fields),
        truncated=_streams_flag(fields.table("truncated")),
        bytes=_streams_number(fields.table("bytes")),
        exception=_exception(fields.table("exception")),
        violations=tuple(_violation(v) for v in fields.tables("violations")),
        files=tuple(_artifact(f) for f in fields.tables("files")),
        files_omitted=fields.number("files_omitted"),
        syscalls=_syscalls(fields),
        usage=_usage(fields.table("usage")),
        limits=_limits(fields.table("limits")),
        enforcement=_enforcement(fields.table("enforcement")),
        profile=fields.optional_text("profile"),
        error=_error(fields.table("error")),
        warnings=fields.texts("warnings"),
        id=fields.obj.get("id"),
        value=fields.optional_text("value"),
        figures=tuple(_figure(f) for f in fields.tables("figures")),
        state=fields.optional_text("state"),
        cell=fields.optional_number("cell"),
        sandbox=fields.optional_number("sandbox"),
        worker=fields.optional_text("worker"),
        raw=dict(fields.obj),
    )
