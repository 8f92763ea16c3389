"""What the documentation tests share: where things are."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("PYSANDBOX_BUILD_DIR", REPO / "build"))
PYSANDBOX = Path(os.environ.get("PYSANDBOX", BUILD / "bin" / "pysandbox"))
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
