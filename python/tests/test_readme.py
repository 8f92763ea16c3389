"""The Python examples of python/README.md run as written, each against the built binary
(with ``pysandbox``, ``asyncio`` and ``contextlib`` imported, as the file's earlier examples
import them), and leave nothing running."""

import asyncio
import contextlib
import os
import re

import pytest

import pysandbox
from support import REPO, descendants

EXAMPLES = re.findall(r"```python\n(.*?)```", (REPO / "python/README.md").read_text(), re.S)


def test_the_readme_has_examples():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"example-{n + 1}"
                                                    for n in range(len(EXAMPLES))])
def test_an_example_runs(example):
    exec(compile(example, "python/README.md", "exec"),
         {"pysandbox": pysandbox, "asyncio": asyncio, "contextlib": contextlib,
          "__name__": "__main__"})
    assert not descendants(os.getpid())
