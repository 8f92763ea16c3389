"""pysandbox.dask on a real Dask cluster: a `dask scheduler` and two `dask worker` processes on
127.0.0.1, started and stopped here. Every job gets its result from the worker's own pysandbox,
both workers take jobs, and a worker killed mid-batch loses no job and duplicates none."""

import json
import os
import signal
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import pysandbox.dask
from pysandbox import Result, Status
from support import REPO, checked, descendants, exits

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
