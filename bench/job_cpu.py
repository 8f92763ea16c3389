#!/usr/bin/env python3
"""Where a job's CPU and page faults go, by process, for `pysandbox batch` (a cold sandbox per
job) next to `xargs -P N` over `pysandbox run` (issue 35).

Each way runs the same jobs under `perf record` (the `linux-perf` package; root, for the
tracepoints), the ways alternating over the rounds: CPU samples (cpu-clock, one every 100 µs of
CPU time), user page faults (exceptions:page_fault_user) and TLB flushes (tlb:tlb_flush). Every process is given its role
from its place in the process tree (perf's fork records): the supervisor (a `pysandbox` whose
parent is not one), the sandbox's init (its child), the interpreter (init's child: before its
exec, then as python3), the launcher (xargs and the shell). Prints per job: CPU in ms (user,
kernel), page faults, of which write faults on a present page (copy-on-write, each followed by a
TLB flush), and TLB flushes, each the median over the rounds.

Not time.process_time() inside the sandbox: with RLIMIT_CPU set, the kernel reads a process's
CPU clock from its group timer, which moves at the scheduler's tick (4 ms here), not at each call.

    sudo bench/job_cpu.py [--jobs 200] [--parallel 2] [--rounds 3] [--pysandbox build/bin/pysandbox]

Standard library only.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CODE = "print(sum(range(1000)))"
PROFILE = "default"
PERIOD_NS = 100_000  # one cpu-clock sample per 100 µs of CPU time
ROLES = ("supervisor", "init", "interpreter", "launcher")
KINDS = ("cpu-user", "cpu-kernel", "fault", "cow-fault", "tlb-flush")

FORK = re.compile(r"PERF_RECORD_FORK\((\d+):\d+\):\((\d+):\d+\)")
TASK = re.compile(r"^\s*(\S+)\s+(\d+)/")
SAMPLE = re.compile(r"^\s*(\S+)\s+(\d+)/\d+\s+(\S+):\s*(.*)$")
FAULT = re.compile(r"error_code=(0x[0-9a-f]+)")


def record(command: list[str], data: str) -> None:
    subprocess.run(["perf", "record", "-q", "-o", data, "-e", "cpu-clock", "-c", str(PERIOD_NS),
                    "-e", "exceptions:page_fault_user", "-e", "tlb:tlb_flush", "--", *command],
                   check=True, stdout=subprocess.DEVNULL)


def by_role(data: str) -> dict[tuple[str, str], int]:
    """Counts of (role, what): cpu-user, cpu-kernel, fault, cow-fault, tlb-flush."""
    text = subprocess.run(["perf", "script", "-i", data, "--show-task-events",
                           "-F", "comm,pid,tid,event,ip,dso,trace"],
                          check=True, capture_output=True, text=True).stdout
    parent: dict[str, str] = {}
    comms: dict[str, set[str]] = collections.defaultdict(set)
    events: list[tuple[str, str, str]] = []
    for line in text.splitlines():
        task = TASK.match(line)
        if task:
            comms[task.group(2)].add(task.group(1))
        fork = FORK.search(line)
        if fork:
            parent.setdefault(fork.group(1), fork.group(2))
            continue
        match = SAMPLE.match(line)
        if not match or "PERF_RECORD" in line:
            continue
        _, pid, event, rest = match.groups()
        events.append((pid, event, rest))

    def role(pid: str) -> str:
        chain = [pid]
        while chain[-1] in parent and len(chain) < 64:
            chain.append(parent[chain[-1]])
        # The nearest supervisor above (or at) this process: a pysandbox whose parent is not.
        for depth, ancestor in enumerate(chain):
            if "pysandbox" in comms.get(ancestor, ()) and \
                    "pysandbox" not in comms.get(parent.get(ancestor, ""), ()):
                return ("supervisor", "init", "interpreter")[min(depth, 2)]
        return "launcher"

    roles: dict[str, str] = {}
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for pid, event, rest in events:
        who = roles.setdefault(pid, role(pid))
        if event == "cpu-clock":
            counts[(who, "cpu-kernel" if "kernel.kallsyms" in rest else "cpu-user")] += 1
        elif event.endswith("page_fault_user"):
            code = int(FAULT.search(rest).group(1), 16)
            counts[(who, "fault")] += 1
            if code & 3 == 3:  # a write to a present page: copy-on-write (or a protection fault)
                counts[(who, "cow-fault")] += 1
        elif event.endswith("tlb_flush"):
            counts[(who, "tlb-flush")] += 1
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pysandbox",
                        default=os.environ.get("PYSANDBOX", str(REPO / "build/bin/pysandbox")))
    args = parser.parse_args()
    binary, n = args.pysandbox, args.jobs
    work = tempfile.mkdtemp(prefix="pysandbox-job-cpu-")
    jobs_file = os.path.join(work, "jobs.jsonl")
    with open(jobs_file, "w", encoding="utf-8") as file:
        for i in range(n):
            file.write(json.dumps({"id": i, "code": CODE}) + "\n")
    ways = {
        "batch": [binary, "batch", "-q", "-j", str(args.parallel), "-p", PROFILE, jobs_file],
        "xargs run": ["sh", "-c", f"yes x | head -n {n} | xargs -P {args.parallel} -I{{}} "
                      f"{binary} run -p {PROFILE} -c '{CODE}' >/dev/null"],
    }
    # The ways alternate, their order rotated each round, so a busy moment of the machine hits
    # both alike; each figure is the median over the rounds.
    rounds: dict[str, list[collections.Counter[tuple[str, str]]]] = {way: [] for way in ways}
    try:
        for round_number in range(args.rounds):
            names = list(ways)
            names = names[round_number % 2:] + names[:round_number % 2]
            for way in names:
                data = os.path.join(work, "perf.data")
                record(ways[way], data)
                rounds[way].append(by_role(data))
        for way, counts in rounds.items():
            print(f"{way}: {n} jobs, per job, median of {args.rounds} rounds")
            print(f"  {'':12} {'CPU ms':>7} {'user':>6} {'kernel':>7} {'faults':>7} "
                  f"{'cow':>6} {'tlb flush':>9}")
            for who in (*ROLES, "all"):
                row = {what: statistics.median(
                    sum(c[(r, what)] for r in ROLES) if who == "all" else c[(who, what)]
                    for c in counts) / n for what in KINDS}
                if any(row.values()):
                    print_row(who, row)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def print_row(who: str, row: dict[str, float]) -> None:
    ms = PERIOD_NS / 1e6
    user, kernel = row["cpu-user"] * ms, row["cpu-kernel"] * ms
    print(f"  {who:12} {user + kernel:7.2f} {user:6.2f} {kernel:7.2f} {row['fault']:7.1f} "
          f"{row['cow-fault']:6.1f} {row['tlb-flush']:9.1f}")


if __name__ == "__main__":
    sys.exit(main())
