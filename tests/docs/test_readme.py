"""Every example command of the README works as written, with the built pysandbox first on PATH.

The README marks what this test runs with a line `<!-- example -->` right before a fenced block:
```sh blocks run line by line through bash from the repository root (a trailing `# exits N` says
the command must exit N, otherwise 0), ```python blocks run with python3, ```make blocks run with
make in a scratch directory, twice (a Makefile is built again, and must not need cleaning first). `<!-- example needs=FEATURE -->` marks a block that needs a feature
of the documented interface; it runs like any other unless FEATURE is in NOT_YET_MERGED.
"""

import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from docs_support import PYSANDBOX, REPO, env_with_binary_first

# Features the README documents that this branch does not have yet. Blocks that need them are not
# run; the test below lists them, and fails once the feature is there, so whoever merges it
# empties this list and every README example runs.
NOT_YET_MERGED: list[str] = []

EXAMPLE = re.compile(r"^<!-- example(?P<needs>(?: needs=\S+)*)(?: (?P<kind>make))? -->\n"
                     r"```(?P<lang>\w+)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)


class Block:
    def __init__(self, match: re.Match):
        self.needs = [need.split("=", 1)[1] for need in match["needs"].split()]
        self.lang = match["lang"]
        self.body = match["body"]
        self.line = match.string[: match.start()].count("\n") + 2

    @property
    def waiting_for(self) -> list[str]:
        return [need for need in self.needs if need in NOT_YET_MERGED]

    def commands(self) -> list[str]:
        lines = self.body.splitlines()
        return [line for line in lines if line.strip() and not line.startswith("#")]

    def describe(self) -> str:
        return f"README.md:{self.line} ({self.lang}, needs {', '.join(self.needs)})"


def blocks() -> list[Block]:
    return [Block(m) for m in EXAMPLE.finditer((REPO / "README.md").read_text())]


def runnable(lang: str) -> list[Block]:
    return [b for b in blocks() if b.lang == lang and not b.waiting_for]


def expected_exit(command: str) -> int:
    match = re.search(r"#\s*exits (\d+)", command)
    return int(match[1]) if match else 0


def run(args, **kwargs) -> subprocess.CompletedProcess:
    # PYTHONPATH: the Python examples import the package from python/, as if pip-installed.
    env = {**env_with_binary_first(), "PYTHONPATH": str(REPO / "python")}
    return subprocess.run(args, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env=env, **kwargs)


class ReadmeTest(unittest.TestCase):
    def test_shell_commands(self):
        commands = [c for b in runnable("sh") for c in b.commands()]
        self.assertGreaterEqual(len(commands), 8, "the tour's commands were not found")
        for command in commands:
            with self.subTest(command=command):
                proc = run(["bash", "-o", "pipefail", "-c", command], cwd=REPO)
                self.assertEqual(proc.returncode, expected_exit(command),
                                 f"stdout {proc.stdout!r}\nstderr {proc.stderr!r}")

    def test_python_examples(self):
        self.assertTrue(any(b.lang == "python" for b in blocks()), "no Python example")
        for block in runnable("python"):
            with self.subTest(block=block.describe()):
                proc = run([sys.executable, "-c", block.body], cwd=REPO)
                self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_makefile_rules(self):
        rules = runnable("make")
        self.assertTrue(rules or any(b.lang == "make" for b in blocks()), "no Makefile example")
        for block in rules:
            with self.subTest(block=block.describe()), tempfile.TemporaryDirectory() as scratch:
                Path(scratch, "Makefile").write_text(block.body)
                Path(scratch, "examples").symlink_to(REPO / "examples")
                for build in ("first", "second"):
                    proc = run(["make", "-s"], cwd=scratch)
                    self.assertEqual(proc.returncode, 0,
                                     f"{build} build: " + proc.stdout + proc.stderr)

    def test_blocks_waiting_for_a_feature_are_listed_and_the_feature_is_still_missing(self):
        waiting = [b for b in blocks() if b.waiting_for]
        for block in waiting:
            print(f"not run until merged: {block.describe()}:", *block.commands(), sep="\n    ",
                  file=sys.stderr)
        help_text = run([PYSANDBOX, "run", "--help"]).stdout
        for feature in NOT_YET_MERGED:
            with self.subTest(feature=feature):
                self.assertNotRegex(help_text, rf"(?<![-\w]){re.escape(feature)}(?![-\w])",
                                    f"pysandbox has {feature} now: remove it from NOT_YET_MERGED "
                                    f"in {Path(__file__).name} so the README examples using it run")


if __name__ == "__main__":
    unittest.main()
