"""The committed man pages and completions are what the current code generates."""

import difflib
import subprocess
import tempfile
import unittest
from pathlib import Path

from docs_support import GENDOCS, GENERATED, REGENERATE, REPO


class GeneratedFilesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="pysandbox-gendocs-")
        subprocess.run([GENDOCS, REPO, cls.tmp.name], check=True)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_committed_files_match_the_generator(self):
        for name in GENERATED:
            with self.subTest(file=name):
                fresh = (Path(self.tmp.name) / name).read_text()
                committed = (REPO / name).read_text() if (REPO / name).exists() else ""
                diff = "".join(difflib.unified_diff(committed.splitlines(True),
                                                    fresh.splitlines(True),
                                                    f"{name} (committed)", f"{name} (generated)"))
                self.assertTrue(fresh == committed,
                                f"{name} differs from what the code generates; run `{REGENERATE}` "
                                f"and commit the result:\n{diff[:4000]}")

    def test_every_generated_file_has_its_template(self):
        for name in GENERATED:
            self.assertTrue((REPO / f"{name}.in").is_file(), f"{name}.in is missing")


if __name__ == "__main__":
    unittest.main()
