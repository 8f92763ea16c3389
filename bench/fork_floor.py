"""The physical limit of a fork server: what `pysandbox batch --fork` is compared against.

A warm interpreter (run it with Debian's /usr/bin/python3, the interpreter pysandbox runs) that
imports the profile's preload once, then forks one child per job, PARALLEL children at a time,
with no namespaces, no walls, no limits and no supervisor. Each child runs its job's code with its
stdout and stderr on a pipe the server reads to the end; the server waits for it, then writes one
JSON line per job (its id, exit status and output) to its own stdout, as batch writes its results.
No layer of pysandbox, so nothing a sandboxed fork server can go below.

    /usr/bin/python3 -s bench/fork_floor.py JOBS.jsonl [--parallel 2] [--preload numpy,pandas]

JOBS.jsonl: one {"id": ..., "code": ...} per line (bench/batch.py writes it). The jobs per second,
from the first fork to the last result written, go to stderr as `jobs/s N`.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import sys
import time


def run_child(code: str, write_end: int) -> None:
    """In the child: the job's code, its output on the pipe, nothing of the server's after it."""
    os.dup2(write_end, 1)
    os.dup2(write_end, 2)
    os.close(write_end)
    status = 0
    try:
        exec(compile(code, "<job>", "exec"), {"__name__": "__main__"})
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        import traceback
        traceback.print_exc()
        status = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs")
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--preload", default="", help="modules to import first, comma-separated")
    args = parser.parse_args()
    for name in filter(None, args.preload.split(",")):
        __import__(name)
    with open(args.jobs, encoding="utf-8") as file:
        jobs = [json.loads(line) for line in file if line.strip()]
    sys.stdout.flush()
    sys.stderr.flush()

    out = sys.stdout
    selector = selectors.DefaultSelector()
    running: dict[int, tuple[int, object, list[bytes]]] = {}  # read end: pid, id, output
    pending = iter(jobs)
    start = time.perf_counter()
    done = 0
    more = True
    while more or running:
        while more and len(running) < args.parallel:
            job = next(pending, None)
            if job is None:
                more = False
                break
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read_end)
                run_child(job["code"], write_end)
            os.close(write_end)
            running[read_end] = (pid, job["id"], [])
            selector.register(read_end, selectors.EVENT_READ)
        if not running:
            break  # the last job was done before the end of the list was seen
        for key, _ in selector.select():
            read_end = key.fd
            chunk = os.read(read_end, 65536)
            pid, job_id, output = running[read_end]
            if chunk:
                output.append(chunk)
                continue
            selector.unregister(read_end)
            os.close(read_end)
            del running[read_end]
            _, status = os.waitpid(pid, 0)
            out.write(json.dumps({"id": job_id, "exit_code": os.waitstatus_to_exitcode(status),
                                  "stdout": b"".join(output).decode("utf-8", "replace")}) + "\n")
            done += 1
    out.flush()
    elapsed = time.perf_counter() - start
    print(f"jobs/s {done / elapsed:.1f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
