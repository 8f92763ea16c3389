"""The `[python] interpreter` setting: exit 127 when missing, 126 when not executable."""

import glob
import json
import os
import stat
import unittest
import uuid

from harness import SandboxTestCase, profile, run, script


def interpreter_profile(path: str):
    return profile(f'extends = "default"\n\n[python]\ninterpreter = "{path}"\n')


def readable_non_executable_file_under_usr() -> str:
    """A world-readable regular file with no execute bits, inside the bound /usr."""
    candidates = ["/usr/lib/os-release", *sorted(glob.glob("/usr/share/doc/*/copyright"))]
    for path in candidates:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o111 == 0 and st.st_mode & 0o004:
            return path
    raise AssertionError("no readable, non-executable regular file found under /usr")


class InterpreterTest(SandboxTestCase):
    def run_with(self, interpreter: str):
        return run(["run", "-p", interpreter_profile(interpreter),
                    script("print('the script ran')"), "--", self.marker])

    def test_explicit_interpreter_works(self):
        result = self.run_with("/usr/bin/python3")
        self.assertExit(result, 0)
        self.assertEqual(result.stdout, b"the script ran\n")

    def test_missing_interpreter_is_127(self):
        missing = f"/usr/bin/python3-missing-{uuid.uuid4().hex[:8]}"
        result = self.run_with(missing)
        self.assertExit(result, 127)
        self.assertIn(missing.encode(), result.stderr)
        self.assertEqual(result.stdout, b"")

    def test_non_executable_interpreter_is_126(self):
        path = readable_non_executable_file_under_usr()
        result = self.run_with(path)
        self.assertExit(result, 126)
        self.assertIn(path.encode(), result.stderr)
        self.assertEqual(result.stdout, b"")

    def test_directory_as_interpreter_is_126(self):
        result = self.run_with("/usr/bin")
        self.assertExit(result, 126)
        self.assertEqual(result.stdout, b"")

    def test_sys_path_is_the_same_in_a_run_a_job_and_a_forked_job(self):
        # A job's cell driver is imported by a -c that puts its directory first; the job must
        # not see that: its sys.path was ['', '', '/sandbox/.pysandbox', ...] where a run's is
        # ['', '/sandbox/.pysandbox', ...]. With -P (safe_path) a run has no '' at all, and a
        # job must not get one back: the working directory holds what the job was given.
        code = "import json, sys; print(json.dumps(sys.path))"
        safe = profile('extends = "default"\n[python]\nargs = ["-s", "-P"]\n')
        for options, working_directory in (([], 1), (["-p", str(safe)], 0)):
            ran = run(["run", *options, "-c", code])
            self.assertExit(ran, 0)
            expected = json.loads(ran.stdout)
            self.assertEqual(expected.count(""), working_directory, expected)
            self.assertEqual(expected[0] == "", working_directory == 1, expected)
            for fork in ([], ["--fork"]):
                with self.subTest(options=options, fork=fork):
                    batch = run(["batch", *options, *fork, "-"],
                                input=json.dumps({"code": code}).encode() + b"\n")
                    self.assertEqual(batch.returncode, 0, batch.stderr)
                    [line] = batch.stdout.splitlines()
                    self.assertEqual(json.loads(json.loads(line)["stdout"]), expected)

if __name__ == "__main__":
    unittest.main()
