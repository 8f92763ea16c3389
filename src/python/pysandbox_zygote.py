"""pysandbox's fork server (`pysandbox batch --fork`; src/engine/zygote.hpp): a warm interpreter, itself
in a pysandbox sandbox, that imports the profile's [python] preload once and then forks one
sandbox per job.

Every fork, and every layer of the forked sandbox, is the helper's (src/inside/zygote_helper.cpp): an
extension module built from pysandbox's own sandbox steps, loaded here. This module only imports,
loads the helper and hands it the channel; the helper returns here only in a forked sandbox's
interpreter, with its layers in place, and that process goes on as the sandbox's cell driver
(pysandbox_driver), as a cloned sandbox's interpreter would.

The jobs' [policy] hook is this interpreter's from its start (sitecustomize, as in a cloned
sandbox; a batch's jobs share one profile): the preload and the driver are imported under it,
and a job never runs without it. Each job announces itself to the hook (ZYGOTE_FORKED_EVENT),
which then reports on the job's own channel.

argv: CONTROL_FD MODULE...
"""

import _imp
import os
import sys
from _frozen_importlib import ModuleSpec

from pysandbox_wire import (POLICY_VARIABLE, SANDBOX_PYTHON_DIR, ZYGOTE_FORKED_EVENT,
                            ZYGOTE_HELPER_FILE, ZYGOTE_HELPER_MODULE, ZYGOTE_JOB_SPEC_FILE)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

# What the plan writes next to this module (plan.cpp).
HELPER = os.path.join(SANDBOX_PYTHON_DIR, ZYGOTE_HELPER_FILE)
JOB_PLAN = os.path.join(SANDBOX_PYTHON_DIR, ZYGOTE_JOB_SPEC_FILE)


def _own_module(name: str, path: "str | None" = None) -> "ModuleType":
    """A module of the zygote's own (the helper; gc, a built-in one), made from its spec outside
    the import system: the job's [policy] hook, installed at this interpreter's start as at a
    cloned one's, sees no import of it, and it is not in sys.modules, where a job's own import
    of the same name would raise no import event (the jobs' sys.modules is then a cloned
    sandbox's: what site, the driver and the preload imported, under the hook)."""
    spec = ModuleSpec(name, None, origin=path)
    if path is None:
        module = _imp.create_builtin(spec)
        _imp.exec_builtin(module)
    else:
        module = _imp.create_dynamic(spec)
        _imp.exec_dynamic(module)
    return module


def _become_job(environment: list[str], modules: list[str], failed: dict[str, str]) -> None:
    """The forked sandbox's interpreter: its environment and arguments are the job plan's, as a
    cloned sandbox's interpreter would have them, then the cell driver takes over."""
    # The [policy] hook, the zygote's since its start, reports on this job's channel from now.
    sys.audit(ZYGOTE_FORKED_EVENT)
    # This module is the zygote's own, as the helper and gc are: a cloned job has none of it.
    sys.modules.pop(__name__, None)
    os.environ.clear()
    for entry in environment:
        name, _, value = entry.partition("=")
        if name != POLICY_VARIABLE:  # sitecustomize takes it out of a cloned one's, too
            os.environ[name] = value
    # Every fork is a copy of this process: `random` is reseeded by CPython's fork hooks, a
    # preloaded library's generator is not.
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        try:
            numpy.random.seed()
        except Exception:
            pass
    import pysandbox_driver
    sys.argv = ["-c", sys.argv[1]] + list(modules)
    pysandbox_driver.main(failed)


def main() -> None:
    channel = int(sys.argv[1])
    modules = sys.argv[2:]
    os.set_inheritable(channel, False)
    with open(JOB_PLAN, "rb") as file:
        spec = file.read()
    helper = _own_module(ZYGOTE_HELPER_MODULE, HELPER)
    environment: list[str] = helper.configure(spec)
    # As a cloned sandbox's driver does, under the hook: the driver first, then the preload,
    # whose failures each job reports as its own (and the hook's blocks, which it keeps).
    import pysandbox_driver
    failed = pysandbox_driver._preload(modules)
    gc = _own_module("gc")
    gc.collect()
    gc.freeze()  # fewer copy-on-write faults in the jobs
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # nothing of the zygote's may reach a job's output
    # serve() says Ready (or why not) on the channel itself.
    if helper.serve(channel) == 1:
        _become_job(environment, modules, failed)
