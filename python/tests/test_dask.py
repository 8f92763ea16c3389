"""pysandbox.dask on a real Dask cluster: a `dask scheduler` and two `dask worker` processes on
127.0.0.1, started and stopped here. Every job gets its result from the worker's own warm
pysandbox (a long-lived `pysandbox batch` per profile, held by a worker plugin: `--fork` by
default on the host's kernel, plain on gVisor, as the servers' command lines show), the same
result as `pysandbox run` gives; both workers take jobs; a server killed mid-chunk answers its
jobs with an error and is replaced; a worker killed mid-batch loses no job and duplicates none; a
worker that closes ends its servers."""

import json
import os
import signal
import socket
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

import pysandbox.dask
from pysandbox import Result, SandboxError, Status
from pysandbox.dask import _server
from pysandbox.dask.__main__ import _parser
from support import REPO, checked, descendants, exits, run, started

WORKERS = ("w1", "w2")
# Every process of the cluster ends by itself even if this test is killed: the workers when the
# scheduler is gone for this long, the scheduler when no client came for this long.
DEATH_TIMEOUT = "20s"
IDLE_TIMEOUT = "120s"
STOP_SECONDS = 10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Cluster:
    """A scheduler and the workers named WORKERS, each running tasks one at a time."""

    def __init__(self, directory: Path, binary: str) -> None:
        try:
            self.distributed = pysandbox.dask.distributed()
        except ImportError as e:
            pytest.fail(f"{e} (apt-get install -y python3-distributed)")
        self.address = f"tcp://127.0.0.1:{free_port()}"
        self.env = dict(os.environ, PYTHONPATH=str(REPO / "python"), PYSANDBOX_BINARY=binary)
        self.directory = directory
        self.processes: dict[str, subprocess.Popen] = {}
        dask = [sys.executable, "-m", "dask"]
        self.start("scheduler", [*dask, "scheduler", "--host", "127.0.0.1",
                                 "--port", self.address.rpartition(":")[2], "--no-dashboard",
                                 "--idle-timeout", IDLE_TIMEOUT])
        for name in WORKERS:
            self.start(name, [*dask, "worker", self.address, "--name", name, "--nthreads", "1",
                              "--no-nanny", "--no-dashboard", "--host", "127.0.0.1",
                              "--death-timeout", DEATH_TIMEOUT,
                              "--local-directory", str(directory / name)])
        # Connecting retries until the scheduler listens; then both workers are awaited.
        self.client = self.distributed.Client(self.address, timeout="30s")
        self.client.wait_for_workers(len(WORKERS), timeout=60)

    def start(self, name: str, argv: list[str]) -> None:
        log = open(self.directory / f"{name}.log", "wb")
        self.processes[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                                stderr=log, env=self.env)
        log.close()

    def worker_address(self, name: str) -> str:
        for address, info in self.client.scheduler_info()["workers"].items():
            if info["name"] == name:
                return address
        raise AssertionError(f"no worker {name} in the cluster")

    def servers(self) -> dict[str, dict[int, int]]:
        """Each worker's warm servers by name: process id -> jobs in it."""
        def pids(dask_worker):
            plugin = dask_worker.plugins.get(pysandbox.dask.PLUGIN_NAME)
            return plugin.servers.pids() if plugin is not None else {}
        return {self.worker_name(address): pids
                for address, pids in self.client.run(pids).items()}

    def server_argvs(self) -> dict[str, list[list[str]]]:
        """Each worker's warm servers by name: their command lines, as the host sees them."""
        return {name: [Path(f"/proc/{pid}/cmdline").read_text().split("\0")[:-1]
                       for pid in pids]
                for name, pids in self.servers().items()}

    def worker_name(self, address: str) -> str:
        return self.client.scheduler_info()["workers"][address]["name"]

    def close(self) -> None:
        self.client.close()
        for process in reversed(self.processes.values()):
            stop(process)

    def logs(self) -> str:
        return "\n".join(f"--- {name}.log\n{(self.directory / f'{name}.log').read_text()[-3000:]}"
                         for name in self.processes)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, built_binary):
    cluster = Cluster(tmp_path_factory.mktemp("dask"), built_binary)
    yield cluster
    cluster.close()


def mixed_jobs(count: int) -> list[dict]:
    """Jobs that end ok, in an exception and in a timeout, each telling its expected end."""
    jobs = []
    for n in range(count):
        if n % 10 == 0:
            jobs.append({"id": f"timeout-{n}", "code": "while True:\n    pass\n",
                         "timeout": "200ms"})
        elif n % 3 == 0:
            jobs.append({"id": f"exception-{n}", "code": f"raise ValueError({n})"})
        else:
            jobs.append({"id": f"ok-{n}", "code": f"print({n} * {n})"})
    return jobs


def check_result(obj: dict) -> Result:
    """The result object, checked against its job's expected end."""
    kind, _, n = obj["id"].partition("-")
    result = checked(Result.from_json(obj))
    if kind == "timeout":
        assert result.status is Status.TIMEOUT, obj
        assert result.limits is not None and result.limits.wall_time_ms == 200
        return result
    if kind == "exception":
        assert result.status is Status.EXCEPTION, obj
        assert result.exception is not None
        assert (result.exception.type, result.exception.message) == ("ValueError", n)
    else:
        assert (result.status, result.stdout) == (Status.OK, f"{int(n) ** 2}\n"), obj
    return result


def test_every_job_runs_once_on_the_workers_own_pysandbox(cluster):
    jobs = mixed_jobs(200)
    results = pysandbox.dask.run_many(cluster.client, jobs)
    assert [r["id"] for r in results] == [j["id"] for j in jobs]  # in the jobs' order
    for obj in results:
        check_result(obj)
    by_worker = Counter(r["worker"] for r in results)
    assert set(by_worker) == set(WORKERS), (by_worker, cluster.logs())
    # By default, on the host's kernel (a forked job enforced as a plain one is, here), each
    # worker's server is a fork server.
    argvs = cluster.server_argvs()
    assert all(argvs[name] for name in WORKERS), argvs
    for argv in (argv for name in WORKERS for argv in argvs[name]):
        assert argv[1] == "batch" and "--fork" in argv, argv


def test_the_command_line_writes_batch_lines_with_the_worker(cluster, tmp_path):
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('{"id": "a", "code": "print(6 * 7)"}\n\nnot json\n'
                    '{"id": "b", "code": "1", "profile": "strict"}\n'
                    '{"id": "c", "code": "1 / 0", "profile": "strict"}\n')
    completed = subprocess.run([sys.executable, "-m", "pysandbox.dask", "--scheduler",
                                cluster.address, "-p", "default", "-p", "strict",
                                "--keep-order", str(jobs)],
                               capture_output=True, text=True, env=cluster.env, timeout=120)
    assert completed.returncode == 0, completed.stderr
    lines = [json.loads(line) for line in completed.stdout.splitlines()]
    assert [(o["id"], o["status"]) for o in lines] == [
        ("a", "ok"), (None, "bad_request"), ("b", "ok"), ("c", "exception")]
    assert all(o["worker"] in WORKERS for o in lines)
    assert lines[0]["stdout"] == "42\n" and lines[3]["profile"] == "strict"
    for obj in lines:
        checked(Result.from_json(obj))


def test_a_profile_not_allowed_is_a_bad_request(cluster):
    [result] = pysandbox.dask.run_many(cluster.client, [{"code": "1", "profile": "strict"}])
    assert result["status"] == "bad_request" and result["id"] == 0
    assert "strict" in result["message"]


# Each ends as `pysandbox run` ends it: the same status, output and exit status.
SAME_AS_RUN = {
    "ok": ("print(6 * 7)", None),
    "error": ("import sys\nprint('partial')\nsys.exit(3)", None),
    "exception": ("print('before')\n1 / 0", None),
    "timeout": ("print('started', flush=True)\nwhile True:\n    pass\n", "300ms"),
    "violation": ("import subprocess\nsubprocess.run(['true'])", None),
}


@pytest.mark.parametrize("fork", [False, True], ids=["warm", "fork"])
def test_a_job_ends_as_pysandbox_run_ends_it(cluster, fork):
    jobs = [{"id": name, "code": code} | ({"timeout": limit} if limit else {})
            for name, (code, limit) in SAME_AS_RUN.items()]
    results = pysandbox.dask.run_many(cluster.client, jobs, fork=fork, chunk=2)
    assert [r["line"] for r in results] == list(range(1, len(jobs) + 1))
    for obj in results:
        code, limit = SAME_AS_RUN[obj["id"]]
        got = checked(Result.from_json(obj))
        expected = run(code, timeout=limit)
        assert (got.status, got.stdout, got.exit_code, got.signal) == (
            expected.status, expected.stdout, expected.exit_code, expected.signal), obj
        assert got.enforcement == expected.enforcement, "a layer differs from run's"
    assert {r["id"]: r["status"] for r in results} == {
        "ok": "ok", "error": "error", "exception": "exception", "timeout": "timeout",
        "violation": "policy_violation"}


def test_jobs_run_on_gvisor_on_the_warm_servers_and_fork_is_refused(cluster):
    # kernel="gvisor": each worker's warm `pysandbox batch --kernel gvisor`; the release is
    # gVisor's, not the host's. gVisor has no fork server: fork=True raises pysandbox's reason.
    release = "import os\nos.uname().release"
    results = pysandbox.dask.run_many(cluster.client, [{"id": n, "code": release}
                                                       for n in range(2)],
                                      kernel="gvisor", timeout="20s", chunk=1)
    for obj in results:
        result = checked(Result.from_json(obj))
        assert result.status is Status.OK and obj["worker"] in WORKERS, obj
        assert result.value != repr(os.uname().release), "the host's kernel answered"
        assert result.enforcement is not None and result.enforcement.kernel == "gvisor"
    # By default the gVisor servers are plain warm batches (no fork server there), no error.
    gvisor = [argv for argvs in cluster.server_argvs().values() for argv in argvs
              if "gvisor" in argv]
    assert gvisor and not [argv for argv in gvisor if "--fork" in argv], gvisor
    with pytest.raises(SandboxError, match=r"no fork server \(batch --fork\)"):
        pysandbox.dask.run_many(cluster.client, [{"code": "1"}], kernel="gvisor", fork=True)


def test_a_worker_keeps_its_servers_warm_and_ends_them_with_its_plugin(cluster):
    jobs = [{"id": f"ok-{n}", "code": f"print({n} * {n})"} for n in range(1, 41)]
    for obj in pysandbox.dask.run_many(cluster.client, jobs, fork=True):
        check_result(obj)
    warm = cluster.servers()
    assert set(warm) == set(WORKERS) and all(warm.values()), warm
    for obj in pysandbox.dask.run_many(cluster.client, jobs, fork=True):
        check_result(obj)
    assert cluster.servers() == warm, "a server was started again"
    # A plugin registered under the same name replaces it: the old one's teardown ends its
    # servers.
    cluster.client.register_worker_plugin(pysandbox.dask.WarmServers(),
                                          name=pysandbox.dask.PLUGIN_NAME)
    old = [pid for pids in warm.values() for pid in pids]
    assert not [pid for pid in old if not exits(pid, within=10)], "a server outlived its plugin"
    assert cluster.servers() == {name: {} for name in WORKERS}


def test_a_killed_server_answers_its_jobs_with_an_error_and_is_replaced(cluster):
    w1 = cluster.worker_address("w1")
    jobs = [(n, f'{{"id": {n}, "code": "import time\\ntime.sleep(1)\\nprint({n})"}}')
            for n in range(1, 5)]
    future = cluster.client.submit(pysandbox.dask.run_jobs, jobs, options=["--fork"],
                                   workers=[w1], pure=False)
    deadline = time.monotonic() + 60
    while not any(cluster.servers()["w1"].values()):  # no event tells that a job was sent
        assert time.monotonic() < deadline and not future.done(), future
        time.sleep(0.02)
    [(pid, _)] = [(p, n) for p, n in cluster.servers()["w1"].items() if n]
    below = descendants(pid)
    os.kill(pid, signal.SIGKILL)
    results = future.result(timeout=60)
    assert [r["line"] for r in results] == [1, 2, 3, 4]  # each job answered, once
    lost = [checked(Result.from_json(r)) for r in results if r["status"] == "sandbox_error"]
    assert lost, results
    for result in lost:
        assert result.error is not None and result.error.step == "worker", result.raw
        assert "killed by SIGKILL" in (result.message or "")
    for obj in results:
        if obj["status"] != "sandbox_error":
            assert (obj["status"], obj["stdout"]) == ("ok", f"{obj['id']}\n"), obj
    assert not [p for p in below if not exits(p, within=10)], "a sandbox outlived its server"
    # The next jobs go to a new server.
    [after] = cluster.client.submit(pysandbox.dask.run_jobs, [(1, '{"code": "print(7)"}')],
                                    options=["--fork"], workers=[w1], pure=False).result(60)
    assert (after["status"], after["stdout"], after["worker"]) == ("ok", "7\n", "w1")
    assert pid not in cluster.servers()["w1"]


def test_a_server_that_refuses_its_options_raises_sandbox_error():
    # No cluster: run_jobs outside a worker uses servers of this process's own.
    with pytest.raises(SandboxError, match="invalid duration"):
        pysandbox.dask.run_jobs([(1, '{"code": "1"}')], options=["--timeout", "soon"])


def test_a_line_that_cannot_be_sent_whole_is_refused_and_later_results_stay_theirs():
    for bad in ('{"code": "print(1)"}\n{"code": "print(2)"}', '{"code": "print(\'\ud800\')"}',
                " "):
        with pytest.raises(ValueError):
            pysandbox.dask.run_jobs([(1, bad)])
    results = pysandbox.dask.run_jobs([(n, f'{{"id": {n}, "code": "print({n})"}}')
                                       for n in (1, 2, 3)])
    assert [(r["id"], r["stdout"], r["line"]) for r in results] == [
        (1, "1\n", 1), (2, "2\n", 2), (3, "3\n", 3)]
    for obj in results:
        assert "worker" not in obj  # no Dask worker ran it
        checked(Result.from_json(obj))


def test_by_default_a_job_is_forked_only_where_its_enforcement_would_not_change(monkeypatch):
    # A host that gives a plain job a cgroup of its own (this one does not): the forked job's
    # enforcement differs, so the server is a plain batch.
    plain = {"kernel": "host", "resources": "cgroup", "degraded": []}
    probes = {True: dict(plain, resources="rlimit", degraded=["cgroup"]), False: plain}
    monkeypatch.setattr(_server, "_probe", lambda argv: probes["--fork" in argv])
    assert "resources ('rlimit', not 'cgroup')" in _server.why_not_fork("default", [])
    assert not _server._forks("default", [], None)
    assert _server._forks("default", [], True) and not _server._forks("default", [], False)
    probes[True] = plain
    assert _server.why_not_fork("default", []) is None and _server._forks("default", [], None)
    probes[True] = "pysandbox: error: no fork server"
    assert "no fork server" in _server.why_not_fork("default", [])
    assert not _server._forks("default", [], None)
    assert not _server._forks("default", ["--fork"], None)  # --fork is in the options already


def test_a_server_still_deciding_whether_to_fork_holds_up_no_other_profile():
    # Deciding runs two one-job batches of the profile: one whose sandboxes are slow to start (a
    # preload that waits; here until the test says, for ever in the worst case) must not hold up
    # the worker's jobs of other profiles, which were run at once with fork=False.
    directory = Path(tempfile.mkdtemp(dir="/var/tmp"))  # under /tmp the sandbox's /tmp hides it
    module = f"held_{os.getpid()}_{time.monotonic_ns()}"
    go = directory / "go"
    (directory / f"{module}.py").write_text(
        f"import os, time\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.01)\n")
    (directory / "held.toml").write_text(
        'extends = "default"\n[filesystem]\nro = ["/usr", "/bin", "/lib", "/lib64", "/sbin", '
        f'"/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives", "{directory}"]\n'
        f'[env.set]\nPYTHONPATH = "{directory}"\n[python]\npreload = ["{module}"]\n')
    for path in directory.iterdir():
        path.chmod(0o644)
    directory.chmod(0o755)
    servers = _server.Servers(1)
    held: list[dict] = []
    sender = threading.Thread(target=lambda: held.append(servers.run(
        str(directory / "held.toml"), (), ['{"code": "1"}'])[0]))
    try:
        sender.start()
        started(os.getpid(), 3, 30)  # the first probe's batch, its sandbox's init, interpreter
        other = threading.Thread(target=servers.run, args=("default", (), ['{"code": "1"}']),
                                 daemon=True)
        other.start()
        other.join(30)
        assert not other.is_alive(), "a default job waited for the held profile's probe"
        assert sender.is_alive() and not held
    finally:
        go.touch()
        sender.join(60)
        servers.close()
        shutil.rmtree(directory)
    assert held and held[0]["status"] == "ok", held


@pytest.mark.parametrize("fork", ["no", "False", 1, 0, []])
def test_a_fork_that_is_not_a_bool_is_refused_before_a_job_is_sent(fork):
    # run_jobs is the Dask task, callable as it is: "no" is true, and would have forked.
    servers, own = _server.Servers(1), _server.own_servers()
    before = own.pids()  # earlier tests' jobs outside a worker
    with pytest.raises(TypeError, match="fork is True, False or None"):
        servers.send("default", (), '{"code": "1"}', fork)
    with pytest.raises(TypeError, match="fork is True, False or None"):
        pysandbox.dask.run_job('{"code": "1"}', fork=fork)
    assert servers.pids() == {} and own.pids() == before


def test_the_command_line_forks_by_default_and_takes_fork_and_no_fork():
    base = ["--scheduler", "tcp://127.0.0.1:1", "jobs.jsonl"]
    assert [_parser().parse_args([*base, *more]).fork
            for more in ([], ["--fork"], ["--no-fork"])] == [None, True, False]
    with pytest.raises(SystemExit):
        _parser().parse_args([*base, "--fork", "--no-fork"])


def test_a_blank_job_is_refused_before_any_task(cluster):
    with pytest.raises(ValueError, match="job 1 is a blank line"):
        pysandbox.dask.run_many(cluster.client, [{"code": "1"}, "  "])


def test_a_worker_killed_mid_batch_loses_no_job(cluster):
    # Last in this file: it leaves one worker. Jobs long enough that the killed worker is
    # in the middle of one.
    jobs = [{"id": f"ok-{n}", "code": f"import time\ntime.sleep(0.2)\nprint({n} * {n})"}
            for n in range(40)]
    victim = cluster.worker_address("w2")
    results = []
    killed = False
    for obj in pysandbox.dask.as_completed(cluster.client, jobs):
        results.append(obj)
        if not killed and obj["worker"] == "w2":
            assert cluster.client.processing(workers=[victim])[victim], "w2 is between jobs"
            worker = cluster.processes["w2"]
            running = descendants(worker.pid)  # its pysandbox, if the next job started
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            killed = True
    assert killed, "w2 ran no job"
    # The killed worker's pysandbox ends with its job (the sandbox's timeout bounds it).
    assert not [pid for pid in running if not exits(pid, within=10)]
    ids = Counter(r["id"] for r in results)
    assert ids == Counter(j["id"] for j in jobs), "a job lost or run twice"
    for obj in results:
        check_result(obj)
    after = results[[r["worker"] for r in results].index("w2") + 1:]
    assert "w1" in {r["worker"] for r in after}, cluster.logs()


def test_a_worker_that_closes_ends_its_servers(cluster):
    # After the kill above: w1 is the one worker left. SIGTERM closes it (its plugin's teardown).
    pysandbox.dask.run_many(cluster.client, [{"code": "print(1)"}], fork=True)
    pids = list(cluster.servers()["w1"])
    assert pids
    worker = cluster.processes["w1"]
    worker.terminate()
    assert worker.wait(STOP_SECONDS) == 0, cluster.logs()
    assert not [pid for pid in pids if not exits(pid, within=10)], "a server outlived its worker"
