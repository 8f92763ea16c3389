"""`pip install --no-build-isolation ./python` works offline, with Debian's setuptools and
wheel, into a virtual environment: the installed package (py.typed included) runs the built
binary."""

import shutil
import subprocess
import sys

from support import REPO


def test_pip_installs_the_package_offline(tmp_path, built_binary):
    # A copy: the build writes build/ and *.egg-info next to pyproject.toml.
    source = tmp_path / "python"
    shutil.copytree(REPO / "python", source,
                    ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
    pip = subprocess.run([venv / "bin/python", "-m", "pip", "install", "--no-build-isolation",
                          "--no-index", "--disable-pip-version-check", "--quiet", source],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr

    code = ("import importlib.resources, pysandbox, pysandbox.dask\n"
            "assert pysandbox.dask.__file__.startswith(pysandbox.__file__.rpartition('/')[0])\n"
            "print(pysandbox.__file__)\n"
            "print(importlib.resources.files('pysandbox').joinpath('py.typed').is_file())\n"
            "print(pysandbox.run('print(6 * 7)').stdout, end='')\n")
    used = subprocess.run([venv / "bin/python", "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env={"PYSANDBOX_BINARY": built_binary, "PATH": "/usr/bin:/bin"},
                          timeout=60)
    assert used.returncode == 0, used.stderr
    location, typed, answer = used.stdout.splitlines()
    assert location.startswith(str(venv / "lib")), location
    assert (typed, answer) == ("True", "42")
