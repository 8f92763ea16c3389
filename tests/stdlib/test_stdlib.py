"""CPython's own test suite, inside the sandbox and outside: the contract an allowlist can break.

The seccomp allowlist (pysandbox(1), SYSTEM CALLS) was measured on what the standard library
needs; a call left out would show as a test that passes outside and fails inside. This runs the
same modules of Debian's libpython3.X-testsuite (X: /usr/bin/python3's) as uid 65534, outside and
inside `-p datascience` with its [policy] emptied, and compares them test case by test case
(regrtest's JUnit XML): inside may fail only where outside fails too, or where the difference is
the sandbox's intent (INTENDED below). Inside must also have run (nearly) every test case.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from harness import AS_NOBODY, SandboxTestCase, profile, run, script, temp_dir

PYTHON = "/usr/bin/python3"
MODULES = (
    "test_math test_cmath test_decimal test_fractions test_random test_itertools test_functools "
    "test_collections test_heapq test_bisect test_json test_csv test_re test_string "
    "test_textwrap test_datetime test_time test_calendar test_zlib test_gzip test_hashlib "
    "test_hmac test_base64 test_struct test_array test_copy test_enum test_dataclasses "
    "test_typing test_operator test_sort test_uuid test_secrets test_file test_fileio "
    "test_fnmatch test_glob test_pathlib test_tempfile test_shutil test_mmap test_resource "
    "test_select test_thread test_traceback test_sys test_unicodedata"
).split()

# Test cases that fail inside on purpose, each with the sandbox's reason.
INTENDED = {
    # Nothing under /tmp may be executed (noexec, and Landlock grants no execute there): which()
    # finds no executable there, and a file in /tmp cannot be mapped PROT_EXEC.
    **{f"test.test_shutil.{cls}.{name}": "no executable files in /tmp"
       for cls in ("TestWhich", "TestWhichBytes")
       for name in ("test_absolute_cmd", "test_basic", "test_environ_path",
                    "test_environ_path_cwd", "test_environ_path_missing", "test_relative_cmd",
                    "test_relative_path")},
    "test.test_mmap.MmapTests.test_access_parameter": "no executable files in /tmp",
    # The sandbox's rlimits: file size is limits.file_size, and no limit can be raised.
    "test.test_resource.ResourceTest.test_fsize_ismax": "RLIMIT_FSIZE is limits.file_size",
    "test.test_resource.ResourceTest.test_setrusage_refcount": "rlimits cannot be raised",
}

RUNNER = """
import sys
from test.libregrtest.main import main
main()
"""


def failures(junit: Path) -> tuple[set[str], int]:
    """The ids of the test cases that failed or errored, and how many test cases ran."""
    failed, total = set(), 0
    for case in ET.parse(junit).iter("testcase"):
        total += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failed.add(case.get("name"))
    return failed, total


class StdlibTest(SandboxTestCase):
    def test_no_more_failures_inside_than_outside(self):
        # Outside, as the sandbox's own host uid, in a directory it owns.
        outside_dir = Path(tempfile.mkdtemp(prefix="pysandbox-stdlib-", dir="/tmp"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(outside_dir)])
        os.chown(outside_dir, 65534, 65534)
        outside = subprocess.run(
            [*AS_NOBODY, PYTHON, "-m", "test", *MODULES, "--junit-xml",
             str(outside_dir / "junit.xml")],
            cwd=outside_dir, capture_output=True, timeout=600,
            env={"PATH": "/usr/bin:/bin", "HOME": str(outside_dir), "LANG": "C.UTF-8",
                 "TMPDIR": str(outside_dir)})  # regrtest works in a directory of its own there
        self.assertTrue((outside_dir / "junit.xml").exists(),
                        outside.stdout[-2000:] + outside.stderr[-2000:])
        failed_outside, total_outside = failures(outside_dir / "junit.xml")

        relaxed = profile('extends = "datascience"\n[limits]\nwall_time = "600s"\n'
                          'cpu_time = "600s"\ntmp_size = "512MiB"\n'
                          '[policy]\ndeny_imports = []\ndeny_calls = []\n')
        out = temp_dir() / "out"
        os.chown(out.parent, 65534, 65534)
        r = run(["run", "-p", str(relaxed), "--output-dir", str(out), str(script(RUNNER)), "--",
                 *MODULES, "--junit-xml", "/tmp/work/junit.xml"], timeout=900)
        self.assertTrue((out / "junit.xml").exists(), r.describe())
        failed_inside, total_inside = failures(out / "junit.xml")

        self.assertGreaterEqual(total_inside, total_outside * 0.95,
                                "inside ran far fewer test cases" + r.describe())
        unexplained = failed_inside - failed_outside - INTENDED.keys()
        self.assertEqual(sorted(unexplained), [],
                         "test cases that fail only inside the sandbox" + r.describe())


if __name__ == "__main__":
    unittest.main()
