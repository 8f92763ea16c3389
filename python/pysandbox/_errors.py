"""The one exception the package raises for pysandbox's own failures."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._result import Result


class SandboxError(Exception):
    """pysandbox itself failed, so there is no outcome of the code to report.

    Raised when the binary cannot be found or started, when it printed no result, and when it
    refused the request before any sandbox existed (a usage or profile error, user namespaces
    unavailable): the message is pysandbox's own. What the code did, however it ended, is a
    :class:`Result` and never this exception; so is a sandbox that could not be set up
    (status ``sandbox_error`` with the failed ``error.step``).

    Attributes:
        message: what went wrong, as pysandbox said it where it said anything.
        returncode: pysandbox's exit status, or None when it never ran.
        stderr: what pysandbox wrote on standard error (empty when it never ran).
        result: the result object pysandbox printed for the refusal, or None.
    """

    def __init__(self, message: str, *, returncode: int | None = None, stderr: str = "",
                 result: Result | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.returncode = returncode
        self.stderr = stderr
        self.result = result
