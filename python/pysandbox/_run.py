"""``run()``: one request, one fresh sandbox, one result."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from . import _process
from ._process import EnvSpec, InputSpec, StrPath
from ._result import Result


def _program(code: str | None, script: StrPath | None) -> list[str]:
    if (code is None) == (script is None):
        raise TypeError("run() takes the code to run or a script=, exactly one of them")
    if code is not None:
        # Attached to -c, so that code such as "--" is never taken for an option.
        return ["-c" + code] if code else ["-c", ""]
    assert script is not None
    # Absolute, so that a script named "-" is a file and not "the program on stdin".
    return [os.path.abspath(script)]


def run(code: str | None = None, *, script: StrPath | None = None,
        profile: StrPath | None = None, timeout: float | str | None = None,
        inputs: Iterable[InputSpec] = (), args: Sequence[str] = (),
        stdin: bytes | str | None = None, env: EnvSpec = (), net: str | None = None,
        binary: StrPath | None = None, extra_args: Sequence[str] = ()) -> Result:
    """Run Python code in a new sandbox and return how it ended (``pysandbox run --json``).

    Args:
        code: the program's text (given as ``-c``, so through the command line: up to about
            128 KiB; use ``script`` for more).
        script: a file holding the program, instead of ``code``.
        profile: a profile name (``"strict"``, ``"datascience"``) or a profile file's path;
            pysandbox's default profile when None.
        timeout: the wall-clock limit, in seconds or as pysandbox writes durations
            (``"500ms"``); the profile's when None.
        inputs: files to place read-only in the script's working directory, each a path or a
            ``(path, name)`` pair.
        args: the script's arguments (``sys.argv[1:]``), passed verbatim.
        stdin: the script's standard input; empty when None. A str is encoded as UTF-8.
        env: environment variables for the script: a mapping, or ``"NAME"`` (from this
            process's environment) and ``"NAME=VALUE"`` strings.
        net: the network mode (``"none"``, ``"loopback"``, ``"proxy"``); the profile's when None.
        binary: the pysandbox executable; else ``$PYSANDBOX_BINARY``, else ``pysandbox`` on PATH.
        extra_args: other options of ``pysandbox run`` (``["--memory", "64MiB"]``).

    Returns:
        The result, whatever the code did: an exception, a timeout, a denied system call, a
        sandbox that could not be set up are each a status of the result, never an exception.

    Raises:
        SandboxError: pysandbox itself failed: it could not be found or started, it refused the
            request before making a sandbox (a bad option or profile, user namespaces
            disabled; the message is pysandbox's), or it printed no result.
        TypeError: neither or both of ``code`` and ``script``, or an argument of the wrong type.
    """
    program = _program(code, script)
    options = _process.run_options(profile=profile, timeout=timeout, inputs=inputs, env=env,
                                   net=net, extra_args=extra_args)
    if isinstance(args, str):
        raise TypeError("args is a list of arguments, not one string")
    argv = [_process.find_binary(binary), "run", "--json", *options, *program, "--", *args]
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    return _process.single_result(_process.call(argv, data))
