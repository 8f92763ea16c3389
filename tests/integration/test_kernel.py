"""`pysandbox kernel`: a Jupyter kernel driven by clients no one here wrote.

Debian's jupyter_client and nbclient run in kernel_client.py, as the caller under test (root or
nobody, PYSANDBOX_AS), and start the kernel through a kernelspec whose argv is the built binary.
What they saw comes back as JSON and is judged here; what a cell did to the host is judged from
the host.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from harness import PYSANDBOX, SandboxTestCase, command_prefix

CLIENT = Path(__file__).with_name("kernel_client.py")
PYTHON = "/usr/bin/python3"


def streams(iopub: list, name: str = "stdout") -> str:
    return "".join(m["content"]["text"] for m in iopub
                   if m["type"] == "stream" and m["content"]["name"] == name)


def of_type(iopub: list, kind: str) -> list:
    return [m["content"] for m in iopub if m["type"] == kind]


class KernelTest(SandboxTestCase):
    def setUp(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="pysandbox-kernel-test-"))
        os.chmod(self.dir, 0o777)  # the client may be nobody: its runtime files go here
        spec = self.dir / "kernels" / "pysandbox-test"
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [PYSANDBOX, "kernel", "-f", "{connection_file}", "-p", "default"],
            "display_name": "Python (sandboxed, test)", "language": "python",
            "interrupt_mode": "message"}))
        for path in (self.dir / "kernels", spec):
            os.chmod(path, 0o755)
        self.env = dict(os.environ, JUPYTER_PATH=str(self.dir), JUPYTER_RUNTIME_DIR=str(self.dir),
                        JUPYTER_DATA_DIR=str(self.dir), JUPYTER_CONFIG_DIR=str(self.dir),
                        HOME=str(self.dir), JUPYTER_PLATFORM_DIRS="1")

    def tearDown(self) -> None:
        subprocess.run(["rm", "-rf", str(self.dir)], check=False)

    def client(self, scenario: str, *args: str) -> dict:
        run = subprocess.run(command_prefix() + [PYTHON, str(CLIENT), scenario, *args],
                             env=self.env, capture_output=True, text=True, timeout=240,
                             cwd=self.dir)
        self.assertEqual(run.returncode, 0, run.stderr[-4000:])
        return json.loads(run.stdout.splitlines()[-1])

    def test_execute_streams_results_errors_and_state(self) -> None:
        seen = self.client("basics")
        info = seen["info"]
        self.assertEqual(info["protocol_version"], "5.3")
        self.assertEqual(info["language_info"]["name"], "python")

        first = seen["print"]
        self.assertEqual(first["reply"]["status"], "ok")
        self.assertEqual(first["reply"]["execution_count"], 1)
        types = [m["type"] for m in first["iopub"]]
        self.assertEqual(types[0], "status")
        self.assertEqual(first["iopub"][0]["content"]["execution_state"], "busy")
        self.assertIn("execute_input", types)
        self.assertEqual(streams(first["iopub"]), "hi\n")
        self.assertEqual(of_type(first["iopub"], "execute_result")[0]["data"]["text/plain"], "2")

        self.assertEqual(of_type(seen["kept"]["iopub"], "execute_result")[0]["data"],
                         {"text/plain": "42"})
        self.assertEqual(seen["kept"]["reply"]["execution_count"], 3)

        error = seen["error"]
        self.assertEqual(error["reply"]["status"], "error")
        self.assertEqual(error["reply"]["ename"], "ZeroDivisionError")
        [shown] = of_type(error["iopub"], "error")
        self.assertEqual(shown["ename"], "ZeroDivisionError")
        self.assertIn("    return 1/0", shown["traceback"], "the traceback names the source line")

        # Output while the cell runs: three stream messages, one a line.
        self.assertEqual(streams(seen["stream"]["iopub"]), "0\n1\n2\n")
        self.assertGreaterEqual(len(of_type(seen["stream"]["iopub"], "stream")), 2)

        self.assertEqual([r["status"] for r in seen["is_complete"]],
                         ["complete", "incomplete", "incomplete"])
        self.assertEqual(seen["comm_info"], {"status": "ok", "comms": {}})
        self.assertEqual(seen["exit"], 0, "a shutdown_request ends the kernel with 0")

    def test_interrupt_keeps_state_and_restart_loses_it(self) -> None:
        seen = self.client("interrupt")
        self.assertEqual(seen["reply"]["status"], "error")
        self.assertEqual(seen["reply"]["ename"], "KeyboardInterrupt")
        self.assertLess(seen["seconds"], 10)
        self.assertEqual(of_type(seen["after"]["iopub"], "execute_result")[0]["data"],
                         {"text/plain": "42"})
        self.assertEqual(seen["restarted"]["reply"]["ename"], "NameError")

    def test_timeout_is_an_error_naming_the_limit(self) -> None:
        seen = self.client("timeout")
        reply = seen["loop"]["reply"]
        self.assertEqual(reply["status"], "error")
        self.assertEqual(reply["ename"], "TimeoutError")
        self.assertIn("timeout of 1s", reply["evalue"])
        self.assertIn("kept", reply["evalue"])
        self.assertEqual(of_type(seen["after"]["iopub"], "execute_result")[0]["data"],
                         {"text/plain": "5"})

    def test_cell_cannot_write_to_the_host(self) -> None:
        target = self.dir / "escaped"
        seen = self.client("host_write", str(target))
        self.assertEqual(seen["write"]["reply"]["status"], "ok")
        self.assertFalse(target.exists(), "a cell wrote a host file")
        self.assertFalse(Path("/etc/pysandbox-kernel-escape").exists())

    def test_forged_replayed_and_malformed_messages_do_nothing(self) -> None:
        seen = self.client("hostile")
        self.assertNotIn("FORGED\n", seen["texts"])
        self.assertEqual(seen["texts"].count("ONCE\n"), 1, "a replayed message ran again")
        self.assertEqual(seen["replies"], [seen["once"], seen["last"]])
        self.assertEqual(of_type(seen["good_after"]["iopub"], "execute_result")[0]["data"],
                         {"text/plain": "42"})

    def test_notebook_through_nbclient(self) -> None:
        import nbformat
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("print('from the sandbox')"),
                    nbformat.v4.new_code_cell("1/0"),
                    nbformat.v4.new_code_cell("3 * 14")]
        path = self.dir / "nb.ipynb"
        nbformat.write(nb, str(path))
        os.chmod(path, 0o644)
        cells = self.client("notebook", str(path))["cells"]
        self.assertEqual(cells[0][0]["text"], "from the sandbox\n")
        self.assertEqual([o["ename"] for o in cells[1] if o["output_type"] == "error"],
                         ["ZeroDivisionError"])
        self.assertEqual(cells[2][-1]["data"], {"text/plain": "42"})

    def test_install_writes_a_kernelspec_jupyter_finds(self) -> None:
        prefix = self.dir / "prefix"
        run = subprocess.run(command_prefix() + [PYSANDBOX, "kernel", "install", "--prefix",
                                                 str(prefix), "--name", "sbx", "-p", "strict"],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(run.returncode, 0, run.stderr)
        found = subprocess.run(
            [PYTHON, "-c", "import json; from jupyter_client.kernelspec import "
             "KernelSpecManager as M; s = M().get_kernel_spec('sbx'); "
             "print(json.dumps([s.argv, s.display_name]))"],
            env=dict(os.environ, JUPYTER_PATH=str(prefix / "share/jupyter")),
            capture_output=True, text=True, timeout=30)
        self.assertEqual(found.returncode, 0, found.stderr)
        argv, name = json.loads(found.stdout)
        self.assertEqual(argv[1:], ["kernel", "-f", "{connection_file}", "-p", "strict"])
        self.assertEqual(os.path.realpath(argv[0]), os.path.realpath(PYSANDBOX))
        self.assertIn("sandboxed", name)
        bad = subprocess.run(command_prefix() + [PYSANDBOX, "kernel", "install", "--prefix",
                                                 str(prefix), "--name", "a/b"],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(bad.returncode, 125)
        self.assertIn("must be letters", bad.stderr)

    def test_bad_connection_file_exits_125_with_a_reason(self) -> None:
        bad = self.dir / "bad.json"
        for text, reason in (("not json", "not a JSON object"),
                             (json.dumps({"shell_port": 1, "key": ""}), "has no key"),
                             (json.dumps({"key": "k", "shell_port": "x"}), "shell_port")):
            bad.write_text(text)
            os.chmod(bad, 0o644)
            run = subprocess.run(command_prefix() + [PYSANDBOX, "kernel", "-f", str(bad)],
                                 capture_output=True, text=True, timeout=30)
            self.assertEqual(run.returncode, 125, run.stderr)
            self.assertIn(reason, run.stderr)
        run = subprocess.run(command_prefix() + [PYSANDBOX, "kernel", "-f", str(self.dir / "none")],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(run.returncode, 125)
        self.assertIn("cannot read the connection file", run.stderr)


if __name__ == "__main__":
    sys.exit(unittest.main())
