"""The package on gVisor (``kernel="gvisor"``, or a profile with sandbox.kernel = "gvisor"):
run() (a batch job, and a streaming session's cell), a Session, batch() warm, and batch(fork=True)
refused at once. The kernel is judged by what answered the code (gVisor's release, not the
host's) and by the result's enforcement.kernel."""

import json
import os
import subprocess
import sys

import pytest

import pysandbox
from support import REPO, SharedDir, checked, run

RELEASE = "import os\nos.uname().release"
HOST_RELEASE = repr(os.uname().release)
ON_GVISOR = 'extends = "default"\n\n[sandbox]\nkernel = "gvisor"\n'


def assert_on_gvisor(result: pysandbox.Result) -> None:
    assert result.status is pysandbox.Status.OK, result.raw
    assert result.value and result.value != HOST_RELEASE, "the host's kernel answered"
    assert result.enforcement is not None and result.enforcement.kernel == "gvisor"
    assert result.enforcement.gvisor is not None
    assert "seccomp" in result.enforcement.gvisor.inside


def test_run_on_gvisor_by_keyword_and_by_profile(shared_dir: SharedDir) -> None:
    assert_on_gvisor(run(RELEASE, kernel="gvisor", timeout=20))
    profile = shared_dir.file("gvisor.toml", ON_GVISOR)
    assert_on_gvisor(run(RELEASE, profile=profile, timeout=20))
    # The keyword replaces the profile's sandbox.kernel, as --kernel does.
    host = run(RELEASE, profile=profile, kernel="host")
    assert (host.value, host.enforcement and host.enforcement.kernel) == (HOST_RELEASE, "host")
    assert host.enforcement is not None and host.enforcement.gvisor is None


def test_a_streaming_run_and_a_session_on_gvisor() -> None:
    said: list[str] = []
    result = run("print('streamed')\n" + RELEASE, kernel="gvisor", timeout=20,
                 on_stdout=said.append)
    assert_on_gvisor(result)
    assert "".join(said) == "streamed\n"
    with pysandbox.Session(kernel="gvisor", timeout=20) as session:
        first = checked(session.run("import os\nstate = os.uname().release\nstate"))
        again = checked(session.run("state"))
    assert_on_gvisor(first)
    assert (again.value, again.sandbox, again.state) == (first.value, first.sandbox, "kept")


def test_batch_on_gvisor_runs_warm_and_refuses_fork() -> None:
    results = [checked(r) for r in pysandbox.batch([{"id": n, "code": RELEASE} for n in range(2)],
                                                    kernel="gvisor", timeout=20)]
    assert sorted(r.id for r in results) == [0, 1]
    for result in results:
        assert_on_gvisor(result)
    # gVisor has no fork server: pysandbox refuses before any job, and the call says why.
    with pytest.raises(pysandbox.SandboxError, match=r"no fork server \(batch --fork\)"):
        list(pysandbox.batch([{"code": "1"}], kernel="gvisor", fork=True))


def test_a_kernel_that_is_none_raises_with_pysandboxs_message() -> None:
    with pytest.raises(pysandbox.SandboxError, match='"bsd" is not a kernel'):
        pysandbox.run("1", kernel="bsd")


def test_an_unprivileged_caller_runs_on_gvisor(built_binary: str) -> None:
    # As nobody when the tests run as root; as the caller (already unprivileged) otherwise.
    code = ("import json, pysandbox\n"
            f"r = pysandbox.run({RELEASE!r}, kernel='gvisor', timeout=20)\n"
            "print(json.dumps(r.raw))\n")
    prefix = (["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
              if os.geteuid() == 0 else [])
    completed = subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True,
                               text=True, timeout=60, cwd="/",
                               env=dict(os.environ, PYTHONPATH=str(REPO / "python"),
                                        PYSANDBOX_BINARY=built_binary))
    assert completed.returncode == 0, completed.stderr
    result = checked(pysandbox.Result.from_json(json.loads(completed.stdout)))
    assert_on_gvisor(result)
    assert result.enforcement is not None and result.enforcement.host_uid != 0
