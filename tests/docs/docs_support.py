"""What the documentation tests share: where things are (the build, the binary and the result
schema from the test support package, tests/support)."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the support package
from support import env, result_schema  # noqa: E402
from support.env import BUILD, REPO  # noqa: E402

__all__ = ["BUILD", "CMAKE", "GENDOCS", "GENERATED", "PYSANDBOX", "REGENERATE", "REPO",
           "env_with_binary_first", "result_schema"]

PYSANDBOX = Path(env.PYSANDBOX)
GENDOCS = Path(os.environ.get("PYSANDBOX_GENDOCS", BUILD / "bin" / "pysandbox-gendocs"))
CMAKE = os.environ.get("CMAKE_COMMAND", "cmake")
REGENERATE = "cmake --build build --target regen-docs"

# The files pysandbox-gendocs writes, relative to the repository (each from FILE.in).
GENERATED = [
    "man/pysandbox.1",
    "man/pysandbox-profile.5",
    "completions/pysandbox.bash",
    "completions/_pysandbox",
    "completions/pysandbox.fish",
]


def env_with_binary_first() -> dict[str, str]:
    """The caller's environment with the built pysandbox first on PATH."""
    return {**os.environ, "PATH": f"{PYSANDBOX.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
