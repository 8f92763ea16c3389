"""pysandbox's sitecustomize: installs the [policy] audit hook (pysandbox_hook.py) before the
script runs, when the profile has a [policy].

The same file in every run, so the build compiles it once like the other modules. The policy
comes as data: pysandbox sets PYSANDBOX_POLICY (plan.cpp) to one JSON array of literals (strings,
lists of strings, an object of strings, an integer), and it is removed from the environment here,
before the script runs, so nothing the script starts inherits it. JSON of this shape is a Python
literal; it is evaluated with no names at all, so only literals can come out of it.
"""
import os

_policy = os.environ.pop("PYSANDBOX_POLICY", "")
if _policy:
    from pysandbox_hook import install

    install(*eval(_policy, {"__builtins__": {}}, {}))
    del install
del _policy, os
