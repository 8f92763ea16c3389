#!/usr/bin/python3
"""Fork bomb: every process forks until the kernel says no, then they all linger.

The run uses the datascience profile, whose seccomp filter lets processes be created
(seccomp.allow_processes), without its [policy] audit hook, under --max-procs 16: what stops the
bomb must be the process limit itself (RLIMIT_NPROC, or pids.max with a cgroup), not a filter
refusing fork. Every process forks (each child carries on forking) until fork fails or a budget
of BUDGET generations is spent; the budget only keeps the host safe should the limit fail
(2**BUDGET processes, far over the limit). Every process then reports its children and blocks;
once the whole tree has stopped forking the script holds, and the host looks.

Judged from the host:
  - the kernel's seccomp filter for the script allows fork and clone(SIGCHLD), so the test
    measures the limit and not the filter;
  - while the bomb holds, the live tasks in the sandbox's PID namespace (init included) are at
    most LIMIT + 1, and at least LIMIT: the bomb did reach the limit, so it was the limit that
    held it (fewer means something else stopped it and nothing was tested);
  - sampled every 20 ms during the whole run, the run's tasks never exceed LIMIT + 1;
  - the host stays responsive: a host process of the sandbox's own host uid starts and ends
    quickly while the bomb holds;
  - released, the run ends on time with the script's exit 0, and nothing of it is left.
The script's own notes (its fork errors, EAGAIN expected) are diagnostics only.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

LIMIT = 16
BUDGET = 7              # 2**7 = 128 processes if nothing stops the bomb
RELEASE_SECONDS = 3.0   # from the host's go to the end of the run
SPAWN_SECONDS = 2.0     # a host process started while the bomb holds

SCRIPT = r'''
import collections, os
budget = int(ARGS[0])
original = os.getpid()
rec_r, rec_w = os.pipe()      # every process reports "pid children errno" here
gate_r, gate_w = os.pipe()    # only the original keeps gate_w: EOF on gate_r releases the rest
children = []
failure = None
while budget > 0:
    try:
        pid = os.fork()
    except OSError as e:
        failure = e.errno
        break
    budget -= 1
    if pid == 0:
        if os.getpid() != original and gate_w is not None:
            os.close(gate_w)
            os.close(rec_r)
            gate_w = None
        children = []
        continue
    children.append(pid)
os.write(rec_w, ("%d %s %s\n" % (os.getpid(), ",".join(map(str, children)) or "-",
                                 failure)).encode())
if os.getpid() != original:
    os.read(gate_r, 1)        # blocks until the original closes the gate (or dies)
    os._exit(0)

# The original: read the reports until every descendant has stopped forking (a finished
# process names all its children, so the tree is complete once each named child reported).
finished = {}
failures = collections.Counter()
def complete():
    todo = [original]
    while todo:
        pid = todo.pop()
        if pid not in finished:
            return False
        todo.extend(finished[pid])
    return True
buf = b""
while not complete():
    buf += os.read(rec_r, 65536)
    *lines, buf = buf.split(b"\n")
    for line in lines:
        pid, kids, err = line.decode().split(" ")
        finished[int(pid)] = [int(k) for k in kids.split(",")] if kids != "-" else []
        if err != "None":
            failures[errno.errorcode.get(int(err), err)] += 1
note("processes", "ok: %d" % len(finished))
note("fork failures", "ok: %s" % dict(failures))
hold()
os.close(gate_w)
for child in children:
    os.waitpid(child, 0)
note("done", 0)
'''


def check_tasks(judge: A.Judge, sb: A.Sandbox) -> str:
    """The tasks alive in the sandbox while the bomb holds: at most the limit, and at least it
    (else something else stopped the bomb). Returns what was counted."""
    procs, tasks = tasks_in_sandbox(sb)
    judge.check(tasks <= LIMIT + 1, f"{tasks} tasks ({procs} processes) alive at once in the "
                f"sandbox under --max-procs {LIMIT} (at most {LIMIT + 1} with init)")
    if tasks < LIMIT:
        judge.misbehaved(f"the bomb stopped at {tasks} tasks, below --max-procs {LIMIT}: "
                         f"something other than the process limit refused fork, so the "
                         f"limit was not tested")
    return f"\nwhile held: {procs} processes, {tasks} tasks in the sandbox's PID namespace"


def tasks_in_sandbox(sb: A.Sandbox) -> tuple[int, int]:
    """(processes, tasks) alive in the sandbox's PID namespace, counted from the host: every
    process of the namespace, with or without the marker."""
    pidns = sb.init().ns["pid"]
    procs = tasks = 0
    for pid in A.all_pids():
        if A.readlink(f"/proc/{pid}/ns/pid") != pidns:
            continue
        try:
            n = len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue  # gone meanwhile
        procs += 1
        tasks += n
    return procs, tasks


def test():
    judge = A.Judge(f"fork bomb under --max-procs {LIMIT} (datascience: fork allowed)")
    profile = A.kernel_only_profile("datascience")
    sb = A.Sandbox(SCRIPT, [BUDGET], options=["-p", str(profile), "--max-procs", str(LIMIT)],
                   timeout="15s")
    sb.start()
    held = ""
    # Through gVisor the script's processes are gVisor's, counted against its process limit
    # (the bundle's RLIMIT_NPROC); the host's tasks in the sandbox are runsc's (its sentry's
    # threads, the stubs of the script's address spaces), no count of the script's. The host
    # judges that only runsc runs there and, as for every via, that the host's user can still
    # start a process and that the run ends when released; that the limit refused the bomb
    # (EAGAIN) is judged after the run.
    gvisor = A.VIA == "gvisor"
    if sb.wait_ready():
        if gvisor:
            for problem in sb.gvisor_problems():
                judge.escape(problem)
        else:
            held = check_tasks(judge, sb)
        allowed_forks = () if gvisor else (
            ("fork", 57, ()),
            ("clone(CLONE_CHILD_SETTID|CLONE_CHILD_CLEARTID|SIGCHLD)", 56, (0x01200011,)))
        for what, nr, args in allowed_forks:
            ret = A.verdict(sb.filters(), nr, A.AUDIT_ARCH_X86_64, args)
            if ret != A.RET_ALLOW:
                judge.misbehaved(f"the seccomp filter answers {what} with {A.action_name(ret)}: "
                                 f"the test would measure the filter, not the process limit")
        start = time.monotonic()
        try:
            subprocess.run(["/bin/true"], user=A.NOBODY, group=A.NOBODY, extra_groups=[],
                           timeout=30, check=True)
            spawned = time.monotonic() - start
            judge.check(spawned < SPAWN_SECONDS, f"the host took {spawned:.1f}s to run /bin/true "
                        f"as uid {A.NOBODY} while the bomb held")
        except (OSError, subprocess.SubprocessError) as e:
            judge.escape(f"the host could not run /bin/true as uid {A.NOBODY} while the bomb "
                         f"held: {e}")
    else:
        judge.misbehaved("the bomb never reported that it stopped forking (no hold)")
    released = time.monotonic()
    sb.finish()
    release_time = time.monotonic() - released
    o = A.check_behaved(judge, sb, allowed=(0,), grace=1.0, expect_notes=["processes", "done"])
    if not o.host_timeout and release_time > RELEASE_SECONDS:
        judge.misbehaved(f"released, the run took {release_time:.1f}s to end")
    peak, peak_tasks = sb.sampler.peak_procs, sb.sampler.peak_tasks
    if gvisor:
        if "EAGAIN" not in str(o.note("fork failures")):
            judge.misbehaved("no fork was refused with EAGAIN: the process limit was not tested")
    else:
        judge.check(peak_tasks <= LIMIT + 1, f"sampled: {peak} processes / {peak_tasks} tasks "
                    f"of the run at once under --max-procs {LIMIT}")
    judge.done(o.describe() + held + f"\nsampled peak: {peak} processes, {peak_tasks} tasks; "
               f"released in {release_time:.2f}s")


if __name__ == "__main__":
    A.main(test)
