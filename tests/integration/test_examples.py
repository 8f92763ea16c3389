"""The programs in examples/ run in the sandbox and print what they promise."""

import json
import unittest

from harness import REPO, SandboxTestCase, require_modules, run

EXAMPLES = REPO / "examples"

# example -> its whole standard output
EXPECTED_OUTPUT = {
    "primes.py": "76127\n",
    "average.py": "Average value: 30.0\n",
}


class ExamplesTest(SandboxTestCase):
    def run_example(self, name: str):
        result = run(["run", EXAMPLES / name, "--", self.marker])
        self.assertExit(result, 0)
        return result

    def test_each_example_prints_its_answer(self):
        for name, expected in EXPECTED_OUTPUT.items():
            with self.subTest(example=name):
                result = self.run_example(name)
                self.assertEqual(result.stdout.decode(), expected, result.describe())
                self.assertEqual(result.stderr, b"", result.describe())

    def test_hello_greets_from_the_sandbox_cwd(self):
        result = self.run_example("hello.py")
        lines = result.stdout.decode().splitlines()
        self.assertEqual(lines[0], "Hello from the sandbox!", result.describe())
        self.assertIn("cwd /tmp", lines[1])

    def test_plot_csv_cleans_the_input_and_saves_a_plot(self):
        require_modules("pandas", "matplotlib")
        result = run(["run", "-p", "datascience", "--input", EXAMPLES / "data.csv", "--json",
                      EXAMPLES / "plot_csv.py", "--", self.marker], timeout=90)
        obj = result.json()
        self.assertEqual(obj["stdout"], "2 rows dropped, 4 kept, mean sales 151.2\nsaved plot.png\n",
                         result.describe())
        self.assertEqual([f["path"] for f in obj["files"]], ["plot.png"])

    def test_risky_is_found_by_check_and_refused_by_run(self):
        found = run(["check", "--json", EXAMPLES / "risky.py"])
        self.assertExit(found, 1)
        findings = json.loads(found.stdout)["findings"]
        self.assertEqual([(f["line"], f["rule"], f["name"]) for f in findings],
                         [(8, "denied-call", "os.system")], found.describe())
        result = run(["run", "--json", EXAMPLES / "risky.py", "--", self.marker])
        obj = result.json()
        self.assertEqual((obj["status"], obj["exit_code"]), ("policy_violation", 1), result.describe())
        self.assertEqual(obj["stdout"], "sum of squares: 285\n")
        self.assertEqual(obj["exception"]["line"], 8)
        self.assertEqual(obj["violations"],
                         [{"kind": "call", "what": "os.system", "count": 1, "action": "denied"}])

    def test_every_example_is_tested(self):
        tested = set(EXPECTED_OUTPUT) | {"hello.py", "plot_csv.py", "risky.py"}
        self.assertEqual({p.name for p in EXAMPLES.glob("*.py")} - tested, set())


if __name__ == "__main__":
    unittest.main()
