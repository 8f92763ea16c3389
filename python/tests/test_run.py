"""pysandbox.run against the built binary: each outcome comes back as a typed Result (checked
against schema/pysandbox.result.v1.json too), and only pysandbox's own failures raise."""

import os
import subprocess
import time
from pathlib import Path

import pytest

import pysandbox
from pysandbox import SandboxError, Status
from support import (REPO, cmake_version, descendants, gone, result_schema, run,
                     started)


def test_ok_fills_every_field():
    result = run("print(6 * 7)")
    assert result.status is Status.OK and result.status == "ok" and result.ok
    assert (result.exit_code, result.signal, result.message) == (0, None, None)
    assert (result.stdout, result.stderr, result.stdout_bytes) == ("42\n", "", b"42\n")
    assert result.encoding == pysandbox.Streams("utf-8", "utf-8")
    assert result.output == (("stdout", 3),)
    assert result.bytes == pysandbox.Streams(3, 0)
    assert result.truncated == pysandbox.Streams(False, False)
    assert (result.exception, result.violations, result.files, result.error) == (None, (), (), None)
    assert result.pysandbox_exit_code == 0
    assert result.profile == "default"
    assert result.schema == "pysandbox.result/v1"
    assert result.version == pysandbox.__version__
    # run() is a warm batch job: print(6 * 7) can take under the millisecond wall_ms counts in.
    assert result.usage is not None and result.usage.wall_ms >= 0 and result.usage.max_rss_kib > 0
    assert result.limits is not None and result.limits.wall_time_ms == 5000
    assert result.limits.network == "none"
    assert result.enforcement is not None and result.enforcement.no_new_privs
    assert "user" in result.enforcement.namespaces and result.enforcement.capabilities == ()
    assert result.raw["stdout"] == "42\n" and result.raw["status"] == "ok"
    assert result.id is None and result.figures == () and result.cell is None


def test_a_final_expression_is_the_value(shared_dir):
    result = run("import math\nprint('side')\nmath.factorial(20)")
    assert (result.status, result.stdout, result.value) == (Status.OK, "side\n",
                                                            "2432902008176640000")
    assert run("x = 1").value is None and run("None").value is None
    script = shared_dir.file("last.py", "import sys\n{'args': sys.argv[1:]}\n")
    assert run(script=script, args=["a"]).value == "{'args': ['a']}"


def test_output_dir_receives_the_files_the_code_made(shared_dir):
    target = shared_dir.path / "out"
    result = run("import os\nopen('a.txt', 'w').write('hi')\nos.mkdir('d')\n"
                 "open('d/b.txt', 'w').write('b')", output_dir=target)
    assert result.ok, result
    made = sorted(p.relative_to(target).as_posix() for p in target.rglob("*"))
    assert made == ["a.txt", "d", "d/b.txt"]
    assert (target / "a.txt").read_text() == "hi" and (target / "d/b.txt").read_text() == "b"
    assert {f.path: f.host_path for f in result.files} == {
        "a.txt": str(target / "a.txt"), "d/b.txt": str(target / "d/b.txt")}
    assert list(shared_dir.path.iterdir()) == [target]  # nothing else left beside it
    empty = shared_dir.path / "empty"
    empty.mkdir()
    assert run("1", output_dir=empty).ok and list(empty.iterdir()) == []
    assert run("1", output_dir=shared_dir.path / "new").ok
    assert (shared_dir.path / "new").is_dir()


def test_an_output_dir_that_is_not_empty_is_refused_and_left_as_it_was(shared_dir):
    kept = shared_dir.file("kept.txt", "mine")
    with pytest.raises(SandboxError, match="not an empty directory"):
        pysandbox.run("open('kept.txt', 'w').write('theirs')", output_dir=shared_dir.path)
    assert list(shared_dir.path.iterdir()) == [kept] and kept.read_text() == "mine"


def test_callbacks_get_stdout_and_stderr_and_the_result_holds_them_too():
    out, err = [], []
    result = run("import sys\nprint('a', flush=True)\nprint('b', file=sys.stderr)\n6 * 7",
                 on_stdout=out.append, on_stderr=err.append)
    assert result.ok and result.value == "42", result
    assert ("".join(out), "".join(err)) == ("a\n", "b\n") == (result.stdout, result.stderr)


def test_callbacks_get_the_output_while_the_code_runs_and_can_stop_it():
    class Seen(Exception):
        pass

    def on_stdout(text: str) -> None:
        raise Seen(text)

    began = time.monotonic()
    with pytest.raises(Seen, match="first"):
        pysandbox.run("print('first', flush=True)\nimport time\ntime.sleep(60)", timeout=90,
                      on_stdout=on_stdout)
    # The callback ran while the code slept, and its exception stopped the run there.
    assert time.monotonic() - began < 30
    assert not descendants(os.getpid()), "nothing of the run may be left"


def test_callbacks_take_no_args_or_stdin():
    with pytest.raises(TypeError, match="no args or stdin"):
        pysandbox.run("1", args=["a"], on_stdout=print)
    with pytest.raises(TypeError, match="no args or stdin"):
        pysandbox.run("1", stdin="x", on_stderr=print)


def test_an_interrupt_stops_the_run_and_leaves_nothing(monkeypatch):
    # What a KeyboardInterrupt does while run() waits for pysandbox, raised as it waits.
    real = subprocess.Popen.communicate
    seen: set[int] = set()

    def interrupted(process, input=None, timeout=None):
        process.stdin.write(input)  # the job: its sandbox starts and runs it
        process.stdin.close()
        seen.update(started(process.pid, 2, within=30))  # the sandbox's init, its interpreter
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess.Popen, "communicate", interrupted)
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        pysandbox.run("import time\ntime.sleep(60)", timeout=90)
    monkeypatch.setattr(subprocess.Popen, "communicate", real)
    assert time.monotonic() - began < 30
    assert seen and not gone(seen)
    assert not descendants(os.getpid())


def test_an_exception_is_a_result_with_its_fields_parsed():
    result = run("def f(x):\n    return 1 / x\n\nf(0)\n")
    assert result.status is Status.EXCEPTION and not result.ok
    assert result.exit_code == 1
    error = result.exception
    assert error is not None
    assert (error.type, error.message, error.line) == ("ZeroDivisionError", "division by zero", 2)
    assert error.summary == "ZeroDivisionError: division by zero (line 2)"
    assert error.traceback.startswith("Traceback (most recent call last):\n")
    assert error.traceback.endswith("ZeroDivisionError: division by zero\n")
    assert error.hint is None


@pytest.mark.parametrize("timeout", [0.3, "300ms"])
def test_a_timeout_is_a_result(timeout):
    result = run("while True:\n    pass\n", timeout=timeout)
    assert result.status is Status.TIMEOUT
    assert (result.exit_code, result.pysandbox_exit_code) == (None, 124)
    assert result.limits is not None and result.limits.wall_time_ms == 300
    assert pysandbox.Violation("resource", "wall_time", 1, "killed") in result.violations
    # The run is a batch job, whose words are "the run was stopped".
    assert result.message is not None
    assert result.message.startswith("wall-clock limit of 300ms reached; the ")


def test_inputs_appear_in_the_working_directory(shared_dir):
    data = shared_dir.file("data.csv", "a,b\n1,2\n")
    result = run("import os\nprint(sorted(os.listdir()), open('data.csv').read().split())\n"
                 "print(open('renamed.csv').read().split())\n",
                 inputs=[data, (str(data), "renamed.csv")])
    assert result.ok, result
    assert result.stdout == "['data.csv', 'renamed.csv'] ['a,b', '1,2']\n['a,b', '1,2']\n"


def test_args_reach_the_script_verbatim(shared_dir):
    script = shared_dir.file("argv.py", "import sys\nprint(sys.argv[1:])\n")
    args = ["two words", "--json", "-c", "--", "é", ""]
    assert run(script=script, args=args).stdout == f"{args}\n"
    assert run("import sys\nprint(sys.argv[1:])", args=args).stdout == f"{args}\n"


def test_code_that_looks_like_an_option_is_code():
    result = run("--")
    assert result.status is Status.EXCEPTION and result.exception is not None
    assert result.exception.type == "SyntaxError"
    assert run("").ok


@pytest.mark.parametrize("data", ["héllo\n", "héllo\n".encode()])
def test_stdin_is_the_scripts_stdin(data):
    result = run("import sys\nprint(sys.stdin.read()[::-1], end='')", stdin=data)
    text = data.decode() if isinstance(data, bytes) else data
    assert result.ok and result.stdout == text[::-1]


def test_stdin_that_is_not_utf8_is_refused_before_anything_runs(shared_dir):
    # A run's stdin travels in the JSON line of a batch job: text only.
    with pytest.raises(ValueError, match="UTF-8"):
        pysandbox.run("print(1)", stdin=b"h\xe9llo\n", output_dir=shared_dir.path / "out")
    assert list(shared_dir.path.iterdir()) == []


def test_without_stdin_the_script_reads_nothing():
    assert run("import sys\nprint(repr(sys.stdin.read()))").stdout == "''\n"


def test_output_that_is_not_text_comes_back_as_bytes():
    result = run("import sys\nsys.stdout.buffer.write(bytes(range(256)))")
    assert result.encoding.stdout == "base64"
    assert result.stdout_bytes == bytes(range(256))


def test_a_profile_by_name_and_by_path(shared_dir):
    strict = run("print(1)", profile="strict")
    assert strict.profile == "strict"
    assert strict.limits is not None and strict.limits.memory_bytes == 128 << 20
    assert strict.enforcement is not None and strict.enforcement.seccomp == "kill"
    own = shared_dir.file("own.toml", 'extends = "default"\n\n[limits]\nwall_time = "3s"\n')
    mine = run("print(1)", profile=own)
    assert mine.ok and mine.limits is not None and mine.limits.wall_time_ms == 3000


def test_env_and_net_and_extra_args():
    result = run("import os\nprint(os.environ['GREETING'], os.environ.get('OTHER'))",
                 env={"GREETING": "hi"}, net="loopback", extra_args=["--memory", "96MiB"])
    assert result.stdout == "hi None\n"
    assert result.limits is not None and result.limits.network == "loopback"
    assert result.limits.memory_bytes == 96 << 20


def test_error_status_and_artifacts():
    result = run("open('out.txt', 'w').write('hi')\nraise SystemExit(3)")
    assert (result.status, result.exit_code, result.exception) == (Status.ERROR, 3, None)
    assert [(f.path, f.size, f.media_type) for f in result.files] == [("out.txt", 2, "text/plain")]
    assert result.files[0].sha256 is not None and len(result.files[0].sha256) == 64


def test_a_sandbox_that_cannot_start_the_interpreter_is_a_result(shared_dir):
    profile = shared_dir.file("broken.toml", 'extends = "default"\n\n[python]\n'
                                             'interpreter = "/nonexistent/python3"\n')
    result = run("print(1)", profile=profile)
    assert result.status is Status.SANDBOX_ERROR
    assert result.error is not None and result.error.step == "execve"
    assert result.pysandbox_exit_code == 127


@pytest.mark.parametrize("kwargs, said", [
    ({"timeout": "soon"}, 'error: --timeout: invalid duration "soon"'),
    ({"extra_args": ["--no-such-option"]}, "--no-such-option"),
    ({"profile": "no-such-profile"}, 'profile error: profile "no-such-profile" not found'),
])
def test_a_usage_error_raises_with_pysandboxs_message(kwargs, said):
    with pytest.raises(SandboxError) as caught:
        pysandbox.run("print(1)", **kwargs)
    assert said in str(caught.value)
    assert caught.value.returncode == 125
    assert f"pysandbox: {caught.value.message}" in caught.value.stderr
    # The run is a batch job, and a batch that refuses to start prints no result.
    assert caught.value.result is None


def test_a_missing_binary_raises():
    with pytest.raises(SandboxError, match="cannot run /nonexistent/pysandbox"):
        pysandbox.run("print(1)", binary="/nonexistent/pysandbox")


def test_the_binary_is_found_on_path(monkeypatch, built_binary):
    monkeypatch.delenv("PYSANDBOX_BINARY")
    monkeypatch.setenv("PATH", str(Path(built_binary).parent))
    assert run("print(1)").stdout == "1\n"
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SandboxError, match="pysandbox not found on PATH"):
        pysandbox.run("print(1)")


@pytest.mark.parametrize("binary", ["/bin/true", "/bin/echo"])
def test_a_binary_that_prints_no_result_raises(binary):
    with pytest.raises(SandboxError, match="without a result|not JSON"):
        pysandbox.run("print(1)", binary=binary)


def test_code_or_script_exactly_one(shared_dir):
    with pytest.raises(TypeError):
        pysandbox.run()
    with pytest.raises(TypeError):
        pysandbox.run("print(1)", script=shared_dir.file("x.py", "print(1)\n"))
    with pytest.raises(TypeError):
        pysandbox.run("print(1)", args="one string")


def test_status_covers_every_status_of_the_schema():
    schema = result_schema.load_schema()
    assert {status.value for status in Status} == set(schema["$defs"]["status"]["enum"])


def test_a_bad_request_reads_as_a_result():
    obj = {"schema": "pysandbox.result/v1", "version": "0.1.0", "status": "bad_request",
           "id": {"job": 7}, "message": "line 3: not JSON"}
    result = pysandbox.Result.from_json(result_schema.validate(obj))
    assert (result.status, result.id, result.message) == (Status.BAD_REQUEST, {"job": 7},
                                                          "line 3: not JSON")
    assert (result.stdout, result.usage, result.exit_code, result.violations) == ("", None, None, ())


@pytest.mark.parametrize("obj, said", [
    ({"schema": "pysandbox.result/v2", "status": "ok"}, "schema"),
    ({"schema": "pysandbox.result/v1", "status": "fine"}, "unknown status 'fine'"),
    ({"schema": "pysandbox.result/v1", "status": "ok", "exit_code": "0"}, "exit_code"),
    ({"schema": "pysandbox.result/v1", "status": "ok", "exit_code": True}, "exit_code"),
    (["not", "an", "object"], "not a JSON object"),
])
def test_what_is_not_a_result_raises(obj, said):
    with pytest.raises(SandboxError, match=said):
        pysandbox.Result.from_json(obj)


def test_the_versions_agree(built_binary):
    shown = subprocess.run([built_binary, "--version"], capture_output=True, text=True, check=True)
    assert pysandbox.__version__ == cmake_version() == shown.stdout.split()[-1]


def test_the_package_under_test_is_this_trees():
    assert Path(pysandbox.__file__).resolve().is_relative_to(REPO / "python")
    assert (REPO / "python/pysandbox/py.typed").is_file()
