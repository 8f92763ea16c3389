"""pysandbox's fork server (`pysandbox batch --fork`; src/engine/zygote.hpp): a warm interpreter, itself
in a pysandbox sandbox, that imports the profile's [python] preload once and then forks one
sandbox per job.

Every fork, and every layer of the forked sandbox, is the helper's (src/inside/zygote_helper.cpp): a
library built from pysandbox's own sandbox steps, loaded here. This module only imports, loads
the helper and hands it the channel; the helper returns here only in a forked sandbox's
interpreter, with its layers in place, and that process goes on as the sandbox's cell driver
(pysandbox_driver), as a cloned sandbox's interpreter would.

argv: CONTROL_FD MODULE...
"""

import ctypes
import os
import sys

from pysandbox_wire import (POLICY_VARIABLE, SANDBOX_PYTHON_DIR, ZYGOTE_DETAIL_SIZE,
                            ZYGOTE_HELPER_FILE, ZYGOTE_JOB_SPEC_FILE)

# What the plan writes next to this module (plan.cpp).
HELPER = os.path.join(SANDBOX_PYTHON_DIR, ZYGOTE_HELPER_FILE)
JOB_PLAN = os.path.join(SANDBOX_PYTHON_DIR, ZYGOTE_JOB_SPEC_FILE)


def _preload(modules: list[str]) -> None:
    for name in modules:
        try:
            __import__(name)
        except BaseException:  # the job's driver imports it again, and says what failed
            pass


def _become_job(environment: list[str], modules: list[str]) -> None:
    """The forked sandbox's interpreter: its environment and arguments are the job plan's, as a
    cloned sandbox's interpreter would have them, then the cell driver takes over."""
    os.environ.clear()
    for entry in environment:
        name, _, value = entry.partition("=")
        os.environ[name] = value
    # Every fork is a copy of this process: `random` is reseeded by CPython's fork hooks, a
    # preloaded library's generator is not.
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        try:
            numpy.random.seed()
        except Exception:
            pass
    if POLICY_VARIABLE in os.environ:
        # The [policy] hook, in the job only (an audit hook cannot be removed): sitecustomize
        # installs it when its variable is set, as at a cloned interpreter's start.
        import importlib
        import sitecustomize
        importlib.reload(sitecustomize)
    import pysandbox_driver
    sys.argv = ["-c", sys.argv[1]] + list(modules)
    pysandbox_driver.main()


def main() -> None:
    channel = int(sys.argv[1])
    modules = sys.argv[2:]
    os.set_inheritable(channel, False)
    with open(JOB_PLAN, "rb") as file:
        spec = file.read()
    import json
    environment = json.loads(spec)["env"]
    _preload(modules)
    __import__("pysandbox_driver")  # every job runs it
    import gc
    gc.collect()
    gc.freeze()  # fewer copy-on-write faults in the jobs
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # nothing of the zygote's may reach a job's output

    helper = ctypes.PyDLL(HELPER)  # PyDLL: the GIL stays held, the fork is CPython's
    helper.pysandbox_zygote_configure.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                                  ctypes.c_char_p, ctypes.c_size_t]
    helper.pysandbox_zygote_serve.argtypes = [ctypes.c_int]
    error = ctypes.create_string_buffer(ZYGOTE_DETAIL_SIZE)  # as much as Ready says
    helper.pysandbox_zygote_configure(spec, len(spec), error, len(error))
    # serve() says Ready (or why not) on the channel itself.
    if helper.pysandbox_zygote_serve(channel) == 1:
        _become_job(environment, modules)
