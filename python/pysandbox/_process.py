"""The pysandbox binary from Python: finding it, the options every front door shares, starting
it, and reading the ``pysandbox.result/v1`` lines it prints.

``run()`` uses it for one request; a long-lived front door (a session, a batch) starts the
binary with ``find_binary``, ``run_options`` and its own subcommand, and turns each line it
reads into a Result with ``parse_result_line``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from typing import Union

from ._errors import SandboxError
from ._result import Result, Status

BINARY_ENV = "PYSANDBOX_BINARY"
"""The environment variable naming the binary when the caller does not."""

StrPath = Union[str, "os.PathLike[str]"]
InputSpec = Union[StrPath, tuple[StrPath, str]]
"""A file for ``--input``: its path (it keeps its name), or ``(path, name)``."""
EnvSpec = Union[Mapping[str, str], Iterable[str]]
"""Variables for ``--env``: a mapping, or ``"NAME"`` (passed from the caller's environment)
and ``"NAME=VALUE"`` strings."""

STOP_GRACE_SECONDS = 5.0
"""How long an interrupted call lets pysandbox end on SIGTERM (killing its sandboxes, removing
its scratch) before it is killed."""

# pysandbox's stderr lines are quoted in an exception up to this many characters.
_MAX_QUOTE = 2000


def find_binary(binary: StrPath | None = None) -> str:
    """The pysandbox executable: ``binary`` if given, else ``$PYSANDBOX_BINARY``, else
    ``pysandbox`` on ``PATH``. Raises SandboxError when there is none."""
    if binary is not None:
        return os.fspath(binary)
    if named := os.environ.get(BINARY_ENV):
        return named
    found = shutil.which("pysandbox")
    if found is None:
        raise SandboxError(f"pysandbox not found on PATH (install it, or name it with the binary "
                           f"argument or ${BINARY_ENV})")
    return found


def duration(value: float | str) -> str:
    """A duration for pysandbox's command line: seconds (a number) or a string as pysandbox
    takes it (``"500ms"``, ``"2s"``, ``"1m"``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a duration is a number of seconds or a string like '500ms', "
                        f"not {value!r}")
    return f"{round(value * 1000)}ms"


def profile_argument(profile: StrPath) -> str:
    # A string is a name or a path, as on the command line; a path object is always a file,
    # which pysandbox knows by a '/' in it.
    return profile if isinstance(profile, str) else os.path.abspath(profile)


def input_argument(spec: InputSpec, *, absolute: bool = False) -> str:
    """``FILE`` or ``FILE=NAME`` for ``spec``; FILE made absolute when ``absolute`` (a batch job
    names host files, which keep their name unless given another)."""
    path, name = spec if isinstance(spec, tuple) else (spec, None)
    text = os.path.abspath(path) if absolute else os.fspath(path)
    if name is None:
        return f"{text}={os.path.basename(path)}" if absolute else text
    return f"{text}={name}"


def _env_arguments(env: EnvSpec) -> list[str]:
    if isinstance(env, Mapping):
        return [f"{name}={value}" for name, value in env.items()]
    if isinstance(env, str):
        raise TypeError("env is a mapping or a list of 'NAME' / 'NAME=VALUE' strings, "
                        "not one string")
    return list(env)


def run_options(*, profile: StrPath | None = None, timeout: float | str | None = None,
                inputs: Iterable[InputSpec] = (), env: EnvSpec = (), net: str | None = None,
                kernel: str | None = None,
                extra_args: Sequence[str] = ()) -> list[str]:
    """The command-line options these arguments stand for, in pysandbox's own spelling;
    ``extra_args`` (any other options) come last."""
    options: list[str] = []
    if profile is not None:
        options += ["--profile", profile_argument(profile)]
    if timeout is not None:
        options += ["--timeout", duration(timeout)]
    for spec in inputs:
        options += ["--input", input_argument(spec)]
    for variable in _env_arguments(env):
        options += ["--env", variable]
    if net is not None:
        options += ["--net", net]
    if kernel is not None:
        options += ["--kernel", kernel]
    if isinstance(extra_args, str):
        raise TypeError("extra_args is a list of arguments, not one string")
    return options + list(extra_args)


def call(argv: Sequence[str], stdin: bytes | None) -> subprocess.CompletedProcess[bytes]:
    """Run ``argv`` (the binary first) to its end, ``stdin`` as its standard input (empty when
    None), capturing both outputs. Raises SandboxError when it cannot be started."""
    try:
        return subprocess.run(list(argv), input=stdin,
                              stdin=subprocess.DEVNULL if stdin is None else None,
                              capture_output=True, check=False)
    except OSError as e:
        raise SandboxError(f"cannot run {argv[0]}: {e}") from None


def _quote(stderr: str) -> str:
    text = stderr.strip()
    return text if len(text) <= _MAX_QUOTE else "[...]" + text[-_MAX_QUOTE:]


def parse_result_line(line: bytes | str) -> Result:
    """One line pysandbox printed, holding one ``pysandbox.result/v1`` object. Raises
    SandboxError when it holds anything else."""
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise SandboxError(f"pysandbox printed a line that is not JSON ({e}): {line!r:.200}") \
            from None
    return Result.from_json(obj)


def is_refusal(result: Result) -> bool:
    """Whether ``result`` is pysandbox refusing the request before any sandbox existed (a usage
    or profile error, a host that cannot make sandboxes), rather than the outcome of a run."""
    return (result.status is Status.SANDBOX_ERROR and result.error is not None and
            result.error.step is None)


def single_result(completed: subprocess.CompletedProcess[bytes]) -> Result:
    """The result of a one-shot ``pysandbox run --json``: its stdout must be exactly one result
    line. Raises SandboxError when it is not, or when the result is a refusal (is_refusal),
    with pysandbox's own message."""
    return single_result_of(completed.returncode, completed.stdout.splitlines(),
                            completed.stderr.decode("utf-8", "replace"))


def single_result_of(returncode: int, lines: Sequence[bytes], stderr: str) -> Result:
    """single_result, from the exit status, the lines on stdout and what was on stderr."""
    if len(lines) != 1:
        said = _quote(stderr) or f"{len(lines)} lines on stdout, not one result"
        raise SandboxError(f"pysandbox exited with status {returncode} without a "
                           f"result: {said}", returncode=returncode, stderr=stderr)
    try:
        result = parse_result_line(lines[0])
    except SandboxError as e:
        raise SandboxError(e.message, returncode=returncode, stderr=stderr) from None
    if is_refusal(result):
        message = result.message or (result.error.message if result.error else "") or stderr
        raise SandboxError(message, returncode=returncode, stderr=stderr, result=result)
    return result


def stop(process: subprocess.Popen[bytes], grace: float) -> None:
    """End ``process`` now, as an interrupted call must: SIGTERM, on which pysandbox kills its
    sandboxes and removes what it made, then SIGKILL if it has not ended within ``grace``
    seconds (its sandboxes die with it, by PR_SET_PDEATHSIG)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
