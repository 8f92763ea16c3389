"""`pysandbox batch` in a CI pipeline: a summary line on stderr at the end whether or not it is a
terminal (--quiet leaves it out), --fail-on-error's exit status 1 when a job is not ok, the input
line of every result (a line that is not JSON included), and --junit's report: well-formed XML in
the testsuites/testsuite/testcase shape Jenkins and GitLab read, with failure and error elements,
whatever bytes the jobs wrote, put in place without writing through a symlink.

Judged from the host: the exit status, stdout and stderr, and the report file as Debian's
python3 xml.etree parses it (no JUnit XSD ships in Debian: the structure is checked element by
element, as the CI readers use it).
"""

import json
import os
import subprocess
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

from harness import (NOBODY, PYSANDBOX, RUN_AS, SandboxTestCase, command_prefix, jobs_file,
                     result_schema, script, temp_dir)

# Output no XML document may hold as it is: a CDATA end, markup, NUL and other C0 controls,
# DEL, bytes that are not UTF-8 (a lone continuation, a surrogate's encoding), U+FFFE.
HOSTILE = (b"]]> <testcase name='forged'/> </system-out> &amp; & \x00\x01\x08\x0b\x0c\x1b\x7f "
           b"\xff\xfe \x80 \xed\xa0\x80 \xef\xbf\xbe \r\n end")
HOSTILE_CODE = ("import sys\n"
                f"sys.stdout.buffer.write({HOSTILE!r})\n"
                f"sys.stderr.buffer.write({HOSTILE!r})\n"
                "sys.stdout.flush()\n"
                "raise ValueError(']]> <x> \\x00 \\x1b \\ufffe')\n")


def batch(*args, jobs: Path):
    return subprocess.run(command_prefix() + [PYSANDBOX, "batch", *args, str(jobs)],
                          capture_output=True, timeout=120)


def raw_jobs(lines: list[str]) -> Path:
    """A jobs file of these lines as they are (not each a JSON object)."""
    return script("".join(line + "\n" for line in lines), name="jobs.jsonl")


def writable_dir() -> Path:
    """A directory the caller (root or nobody) may create files in."""
    return temp_dir(owner=NOBODY if RUN_AS == "nobody" else None)


def results_of(stdout: bytes) -> list[dict]:
    results = [json.loads(line) for line in stdout.splitlines()]
    for result in results:
        result_schema.validate(result)
    return results


class BatchSummaryTest(SandboxTestCase):
    JOBS = [{"id": "a", "code": "pass"}, {"id": "b", "code": "1 / 0"}, {"id": "c", "code": "pass"}]

    def test_one_summary_line_on_stderr_when_it_is_not_a_terminal(self):
        r = batch("-j", "2", jobs=jobs_file(self.JOBS))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(results_of(r.stdout)), 3)
        self.assertRegex(r.stderr.decode(),
                         r"\Apysandbox batch: 3 jobs in \d+\.\d\ds: exception 1, ok 2\n\Z")

    def test_quiet_leaves_the_summary_out(self):
        for flag in ("-q", "--quiet"):
            with self.subTest(flag):
                r = batch(flag, jobs=jobs_file(self.JOBS))
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stderr, b"")
                self.assertEqual(len(results_of(r.stdout)), 3)


class FailOnErrorTest(SandboxTestCase):
    def test_exit_1_when_any_job_is_not_ok_and_0_when_all_are(self):
        cases = {
            "all ok": ([{"code": "pass"}, {"code": "print(1)"}], 0),
            "an exception": ([{"code": "pass"}, {"code": "1 / 0"}], 1),
            "an exit status": ([{"code": "import sys\nsys.exit(3)"}], 1),
            "a timeout": ([{"code": "import time\ntime.sleep(5)", "timeout": "300ms"}], 1),
        }
        for name, (jobs, expected) in cases.items():
            with self.subTest(name):
                r = batch("--fail-on-error", "-q", jobs=jobs_file(jobs))
                self.assertEqual(r.returncode, expected, r.stderr)
                self.assertEqual(len(results_of(r.stdout)), len(jobs))
                # Without the flag the batch's status says only that the jobs ran.
                self.assertEqual(batch("-q", jobs=jobs_file(jobs)).returncode, 0)

    def test_a_line_that_is_not_a_job_fails_the_batch_too(self):
        r = batch("--fail-on-error", "-q", jobs=raw_jobs(['{"code": "pass"}', "not json"]))
        self.assertEqual(r.returncode, 1, r.stderr)


class ResultLineTest(SandboxTestCase):
    def test_every_result_carries_its_input_line(self):
        jobs = raw_jobs(['{"id": "first", "code": "pass"}', "", "{not json",
                         '{"id": "fourth", "code": "print(4)"}', '["an array"]'])
        for order in ([], ["--keep-order"]):
            with self.subTest(order=order):
                r = batch("-q", *order, jobs=jobs)
                self.assertEqual(r.returncode, 0, r.stderr)
                by_line = {result["line"]: result for result in results_of(r.stdout)}
                self.assertEqual(sorted(by_line), [1, 3, 4, 5])  # line 2 is blank: no job
                self.assertEqual((by_line[1]["id"], by_line[1]["status"]), ("first", "ok"))
                self.assertEqual((by_line[4]["id"], by_line[4]["stdout"]), ("fourth", "4\n"))
                bad = by_line[3]
                self.assertEqual({k: bad[k] for k in ("id", "status", "line")},
                                 {"id": None, "status": "bad_request", "line": 3})
                self.assertIsInstance(bad["message"], str)
                self.assertEqual(by_line[5]["status"], "bad_request")
                if order:
                    self.assertEqual([json.loads(x)["line"] for x in r.stdout.splitlines()],
                                     [1, 3, 4, 5])


class JunitTest(SandboxTestCase):
    def check_shape(self, root: ET.Element) -> list[ET.Element]:
        """The structure CI readers use; returns the testcases."""
        self.assertEqual(root.tag, "testsuites")
        suites = list(root)
        self.assertEqual([s.tag for s in suites], ["testsuite"])
        suite = suites[0]
        cases = list(suite)
        self.assertTrue(cases)
        for case in cases:
            self.assertEqual(case.tag, "testcase")
            self.assertTrue(case.get("name"))
            self.assertTrue(case.get("classname"))
            self.assertGreaterEqual(float(case.get("time")), 0)
            for child in case:
                self.assertIn(child.tag, ("failure", "error", "system-out", "system-err"))
            self.assertLessEqual(len(case.findall("failure")) + len(case.findall("error")), 1)
        for element in (root, suite):
            self.assertEqual(int(element.get("tests")), len(cases))
            self.assertEqual(int(element.get("failures")),
                             sum(len(c.findall("failure")) for c in cases))
            self.assertEqual(int(element.get("errors")), sum(len(c.findall("error")) for c in cases))
            self.assertGreaterEqual(float(element.get("time")), 0)
        return cases

    def test_the_report_has_a_testcase_per_job_with_failures_and_errors(self):
        report = writable_dir() / "report.xml"
        jobs = raw_jobs(['{"id": "passes", "code": "print(1)"}',
                         '{"id": "raises", "code": "1 / 0"}',
                         '{"code": "import sys\\nsys.exit(3)"}',
                         '{"id": 7, "code": "pass"}',
                         "not json"])
        r = batch("-q", "--junit", str(report), jobs=jobs)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(os.listdir(report.parent)), ["report.xml"])  # no temporary left
        cases = self.check_shape(ET.parse(report).getroot())
        by_name = {case.get("name"): case for case in cases}
        self.assertEqual(sorted(by_name), ["7", "line 3", "line 5", "passes", "raises"])
        self.assertEqual([c.tag for c in by_name["passes"]], ["system-out"])
        self.assertEqual(by_name["passes"].find("system-out").text, "1\n")
        failure = by_name["raises"].find("failure")
        self.assertEqual(failure.get("type"), "exception")
        self.assertIn("ZeroDivisionError", failure.get("message"))
        self.assertIn("Traceback", failure.text)
        self.assertEqual(by_name["line 3"].find("failure").get("type"), "error")
        self.assertEqual(by_name["line 3"].find("failure").get("message"), "exited with status 3")
        error = by_name["line 5"].find("error")
        self.assertEqual(error.get("type"), "bad_request")
        self.assertTrue(error.get("message"))
        self.assertEqual(list(by_name["7"]), [])

    def test_hostile_output_and_ids_still_make_a_report_that_parses(self):
        report = writable_dir() / "report.xml"
        jobs = jobs_file([
            {"id": "]]><testcase name=\"forged\"/>\x00\x01\u001b\ufffe&", "code": HOSTILE_CODE},
            {"id": "big", "code": "import sys\nsys.stdout.write('x' * 200000 + '<')"}])
        r = batch("-q", "--junit", str(report), jobs=jobs)
        self.assertEqual(r.returncode, 0, r.stderr)
        data = report.read_bytes()
        data.decode("utf-8")  # the whole report is UTF-8
        self.assertNotIn(b"\x00", data)
        cases = self.check_shape(ET.fromstring(data))
        self.assertEqual(len(cases), 2)
        hostile = next(c for c in cases if c.get("name") != "big")
        self.assertTrue(hostile.get("name").startswith("]]><testcase"), hostile.get("name"))
        self.assertEqual([c.tag for c in hostile], ["failure", "system-out", "system-err"])
        out = hostile.find("system-out").text
        self.assertIn("]]> <testcase name='forged'/> </system-out> &amp; & ", out)
        self.assertIn("\\x00\\x01\\x08\\x0B\\x0C\\x1B\\x7F", out)
        self.assertIn("\ufffd", out)
        self.assertTrue(out.endswith("\r\n end"), repr(out[-20:]))
        self.assertIn("ValueError", hostile.find("failure").get("message"))
        big = next(c for c in cases if c.get("name") == "big").find("system-out").text
        self.assertLess(len(big), 70 * 1024)
        self.assertRegex(big, r"\[pysandbox: \d+ more bytes not shown\]\Z")

    def test_a_symlink_at_the_report_path_is_replaced_not_followed(self):
        directory = writable_dir()
        victim = temp_dir() / "victim"
        victim.write_text("precious\n")
        os.symlink(victim, directory / "report.xml")
        r = batch("-q", "--junit", str(directory / "report.xml"),
                  jobs=jobs_file([{"code": "pass"}]))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(victim.read_text(), "precious\n")
        self.assertFalse((directory / "report.xml").is_symlink())
        self.check_shape(ET.parse(directory / "report.xml").getroot())

    def test_a_report_that_cannot_be_created_stops_the_batch_before_any_job(self):
        missing = writable_dir() / "no-such-dir" / "report.xml"
        r = batch("--junit", str(missing), jobs=jobs_file([{"code": "pass"}]))
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertEqual(r.stdout, b"")
        self.assertIn(b"--junit", r.stderr)
        self.assertFalse(missing.parent.exists())


if __name__ == "__main__":
    unittest.main()
