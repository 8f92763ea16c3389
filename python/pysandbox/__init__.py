"""Run untrusted Python in pysandbox from Python.

pysandbox runs a program in Linux namespaces with seccomp, Landlock and a supervisor, so that
it can compute, read what it was given, write into /tmp and print, and nothing else. This
package drives the ``pysandbox`` binary (installed separately; found as the ``binary``
argument, ``$PYSANDBOX_BINARY`` or on PATH) and gives its JSON result as typed dataclasses::

    import pysandbox

    result = pysandbox.run("print(6 * 7)", timeout=2)
    if result.ok:
        print(result.stdout)              # 42
    elif result.exception:
        print(result.exception.summary)   # ZeroDivisionError: division by zero (line 1)
    else:
        print(result.status, result.message)

``result.value`` is the repr of a final expression, as at Python's prompt. A :class:`Session`
keeps one interpreter across cells (``pysandbox session``), and reads back the files its cells
made (:meth:`Session.read_file`, :meth:`Session.list_files`); :func:`batch` runs many jobs from
warm sandboxes (``pysandbox batch``); :mod:`pysandbox.dask` sends them to a Dask cluster.
``on_stdout``/``on_stderr`` callbacks get the output as it comes. :func:`arun`,
:class:`AsyncSession` and :func:`abatch` are the same for asyncio, cancellation included::

    result = await pysandbox.arun("sum(range(10))", timeout=2)    # result.value == '45'
 Whatever the code does is a :class:`Result` whose :class:`Status`
says how it ended; :class:`SandboxError` is raised only when pysandbox itself failed.
"""

from ._async import AsyncSession, abatch, arun
from ._batch import Job, batch
from ._errors import SandboxError
from ._files import FileInfo
from ._result import (Artifact, Enforcement, Error, Figure, Gvisor, Limits, PythonException,
                      Result, Status, Streams, SyscallCount, Usage, Violation)
from ._run import run
from ._session import CellResult, Session

__version__ = "0.1.0"

__all__ = [
    "Artifact",
    "AsyncSession",
    "CellResult",
    "Enforcement",
    "Error",
    "FileInfo",
    "Job",
    "Figure",
    "Gvisor",
    "Limits",
    "PythonException",
    "Result",
    "SandboxError",
    "Session",
    "Status",
    "Streams",
    "SyscallCount",
    "Usage",
    "Violation",
    "abatch",
    "arun",
    "batch",
    "run",
]
