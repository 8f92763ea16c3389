"""pysandbox.batch against the built binary: one result per job with its id, in order or as
jobs finish, bad jobs as bad_request results, and pysandbox's own failures as SandboxError."""

import json
import os
import subprocess
import time

import pytest

import pysandbox
from pysandbox import Job, SandboxError, Status
from support import checked, children, descendants, exits


def run_batch(jobs, **kwargs) -> list[pysandbox.Result]:
    return [checked(result) for result in pysandbox.batch(jobs, **kwargs)]


def test_each_job_gets_its_result_with_its_id():
    jobs = [{"id": f"job-{n}", "code": f"print({n} * {n})"} for n in range(12)]
    results = run_batch(iter(jobs), jobs_at_once=2)
    assert sorted(r.id for r in results) == sorted(j["id"] for j in jobs)
    for result in results:
        n = int(result.id.removeprefix("job-"))
        assert (result.status, result.stdout) == (Status.OK, f"{n * n}\n")


def test_keep_order_follows_the_input_and_jobs_without_id_get_their_position():
    # The first job is the slowest: as they finish, it would come last.
    def jobs(slow_seconds: float) -> list[Job]:
        return [Job(code=f"import time\ntime.sleep({slow_seconds})\nprint('slow')"),
                *[Job(code=f"print({n})") for n in range(1, 6)]]

    start = time.monotonic()
    results = run_batch(jobs(0.5), jobs_at_once=2, keep_order=True)
    elapsed = time.monotonic() - start
    assert [r.id for r in results] == list(range(6))
    assert [r.stdout for r in results] == ["slow\n", *[f"{n}\n" for n in range(1, 6)]]
    # The five quick jobs ran on one worker within `elapsed`: given three times that, the slow
    # job ends last on a loaded machine and under a sanitizer build too, where a fixed half
    # second did not (the five took longer than it).
    finished = run_batch(jobs(3 * elapsed), jobs_at_once=2)
    assert finished[-1].id == 0 and len(finished) == 6


def test_bad_lines_are_bad_request_results_and_the_batch_goes_on():
    jobs = ["not json", {"id": "unknown", "code": "1", "colour": "red"},
            {"id": "no-program"}, {"id": "profile", "code": "1", "profile": "strict"},
            Job(id="good", code="print('fine')")]
    results = {r.id: r for r in run_batch(jobs, keep_order=True)}
    assert set(results) == {None, "unknown", "no-program", "profile", "good"}
    for key in (None, "unknown", "no-program", "profile"):
        assert results[key].status is Status.BAD_REQUEST and results[key].message, key
    assert "strict" in results["profile"].message
    assert results["good"].ok and results["good"].stdout == "fine\n"


def test_a_jobs_requirements_reach_the_batch_which_checks_them():
    # Installing them is tests/integration/test_env_requests.py's: here, that the field is sent.
    job = Job(id="pip-option", code="1", requirements=["--index-url=http://x"])
    assert job.to_json()["requirements"] == ["--index-url=http://x"]
    [result] = run_batch([job])
    assert result.status is Status.BAD_REQUEST, result
    assert 'requirements[0]: "--index-url=http://x" is not a requirement' in result.message


def test_job_fields_reach_the_sandbox(shared_dir):
    data = shared_dir.file("data.txt", "from a file")
    script = shared_dir.file("job.py", "import sys\nprint(sys.argv[1:], sys.stdin.read(), "
                                       "open('in.txt').read())\n")
    jobs = [Job(id="script", script=script, args=["a b", "--"], stdin="piped",
                inputs=[f"{data}=in.txt"]),
            Job(id="timeout", code="while True:\n    pass\n", timeout=0.3),
            Job(id="strict", code="1 / 0", profile="strict"),
            Job(id="value", code="6 * 7")]
    results = {r.id: r for r in pysandbox.batch(jobs, profiles=["default", "strict"])}
    for key in ("script", "timeout", "strict", "value"):
        checked(results[key])
    assert results["script"].stdout == "['a b', '--'] piped from a file\n", results["script"]
    assert results["timeout"].status is Status.TIMEOUT
    assert results["timeout"].limits is not None
    assert results["timeout"].limits.wall_time_ms == 300
    assert results["strict"].status is Status.EXCEPTION and results["strict"].profile == "strict"
    assert results["value"].value == "42"


def test_leaving_early_stops_the_batch():
    jobs = ({"id": n, "code": "print(1)"} for n in range(10_000))
    results = pysandbox.batch(jobs, jobs_at_once=1)
    assert next(results).ok
    running = descendants(os.getpid())
    assert running, "pysandbox batch and its sandboxes should be running"
    results.close()  # kills pysandbox batch; the feeder stops on the broken pipe
    assert not [pid for pid in running if not exits(pid, within=5)]


def test_a_bad_profile_raises_with_pysandbox_s_message():
    with pytest.raises(SandboxError) as raised:
        run_batch([{"code": "1"}], profiles=["no-such-profile"])
    assert raised.value.returncode == 125
    assert 'profile "no-such-profile" not found' in raised.value.message


def test_a_job_that_cannot_be_serialised_raises_after_the_jobs_before_it():
    jobs = [{"id": "fine", "code": "1"}, {"id": "bad", "code": object()}]
    seen = []
    with pytest.raises(TypeError):
        for result in pysandbox.batch(jobs):
            seen.append(result.id)
    assert seen == ["fine"]


def test_no_preload_starts_each_sandbox_without_the_profiles_preload(shared_dir):
    profile = shared_dir.file("preloads.toml", 'extends = "default"\n[python]\n'
                                               'preload = ["json", "email.parser"]\n')
    job = Job(id="seen", code="import sys\n'json' in sys.modules, 'email.parser' in sys.modules")
    (preloaded,) = run_batch([job], profiles=[str(profile)])
    assert preloaded.value == "(True, True)"
    (plain,) = run_batch([job], profiles=[str(profile)], extra_args=["--no-preload"])
    assert plain.value == "(False, False)"


def test_fork_runs_the_jobs_forked_from_a_preloaded_interpreter(shared_dir):
    profile = shared_dir.file("forked.toml", 'extends = "default"\n[python]\n'
                                             'preload = ["email.parser"]\n')
    # A forked job's command line is its zygote's (a cloned one's, the cell driver's).
    code = ("import sys\n"
            "b'pysandbox_zygote' in open('/proc/self/cmdline', 'rb').read(), "
            "'email.parser' in sys.modules")
    jobs = [Job(id=n, code=code) for n in range(4)]
    results = run_batch(jobs, profiles=[str(profile)], fork=True, keep_order=True)
    assert [(r.id, r.status, r.value) for r in results] == \
        [(n, Status.OK, "(True, True)") for n in range(4)]
    (cloned,) = run_batch(jobs[:1], profiles=[str(profile)])
    assert cloned.value == "(False, True)"


def test_a_one_job_batch_starts_one_sandbox(built_binary):
    # What a Dask task runs. A sandbox started ahead for a next job that never comes would take
    # a whole start (the profile's preload included) from the worker's CPUs.
    batch = subprocess.Popen([built_binary, "batch", "--jobs", "1", "-"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    batch.stdin.write(b'{"id": 1, "code": "import time\\ntime.sleep(1.5)\\nprint(1)"}\n')
    batch.stdin.close()
    # While the job sleeps, the batch's children are the sandboxes it has started (their inits).
    most = 0
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and batch.poll() is None:
        most = max(most, len(children(batch.pid)))
        time.sleep(0.01)
    out, err = batch.stdout.read(), batch.stderr.read()
    assert batch.wait(timeout=30) == 0, err
    assert json.loads(out)["stdout"] == "1\n"
    assert most == 1, f"{most} sandboxes at once for one job"
