#!/usr/bin/python3
"""Use up the host user's queued-signal count, so that its other processes cannot queue one.

The kernel counts pending signals per host user across every user namespace: a signal queued to
a sandboxed process counts for the host user the script runs as, against the limit of each
process of that user (RLIMIT_SIGPENDING). pysandbox runs with that limit at 2000, as on a host
whose users have little to spare. The script blocks every signal it can and queues as many as
the kernel takes: real-time signals to itself (each one queued, until EAGAIN), and every
standard signal to each of a few threads and to the process. While it holds them, a process of
the same host user outside any sandbox, with the same limit, queues one real-time signal to
itself. Contained when that process can, and the script was refused (EAGAIN) before it took the
host's whole limit.
"""
import os
import resource
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

HOST_LIMIT = 2000

SCRIPT = r'''
import errno, signal, threading
rt = list(range(signal.SIGRTMIN, signal.SIGRTMAX + 1))
standard = [s for s in range(1, signal.SIGRTMIN)
            if s not in (signal.SIGKILL, signal.SIGSTOP) and s not in (32, 33)]
signal.pthread_sigmask(signal.SIG_BLOCK, rt + standard)
queued = 0
refused = "never"
for i in range(100000):
    try:
        signal.pthread_kill(threading.get_ident(), rt[i % len(rt)])
        queued += 1
    except OSError as e:
        refused = errno.errorcode.get(e.errno, str(e.errno))
        break
release = threading.Event()
def holder():
    signal.pthread_sigmask(signal.SIG_BLOCK, rt + standard)
    me = threading.get_ident()
    for s in standard:
        signal.pthread_kill(me, s)
    release.wait()
threads = [threading.Thread(target=holder) for _ in range(8)]
for t in threads:
    t.start()
for s in standard:
    os.kill(os.getpid(), s)
note("real-time queued", str(queued))
note("refused by", refused)
hold("queued")
release.set()
for t in threads:
    t.join()
note("done", 0)
'''

# A process of the script's host user, outside any sandbox: queues one real-time signal to
# itself (blocked), which tgkill refuses with EAGAIN when the user's count is at its limit.
CHECK = r'''
import signal, threading
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
try:
    signal.pthread_kill(threading.get_ident(), signal.SIGRTMIN)
    print("queued")
except OSError as e:
    print("refused", e.errno)
'''


def low_limit() -> None:
    resource.setrlimit(resource.RLIMIT_SIGPENDING, (HOST_LIMIT, HOST_LIMIT))


def host_can_queue() -> str:
    uid = A.env.expected_host_uid()
    prefix = [] if uid == os.geteuid() else [
        "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    done = subprocess.run(prefix + ["/usr/bin/python3", "-c", CHECK], capture_output=True,
                          text=True, timeout=30, preexec_fn=low_limit)
    return (done.stdout + done.stderr).strip()


def test():
    judge = A.Judge("queued signals in a sandbox use up its host user's count")
    with A.Sandbox(SCRIPT, [], preexec_fn=low_limit) as sandbox:
        if not sandbox.wait_ready("queued"):
            judge.misbehaved("the script never reported its signals queued")
        answer = host_can_queue()
        if answer != "queued":
            judge.escape(f"a host process of the script's user could not queue a signal while "
                         f"the sandbox held its own: {answer!r}")
        sandbox.go()
    outcome = A.check_behaved(judge, sandbox, allowed=(0,), expect_notes=["done"])
    queued, refused = outcome.note("real-time queued"), outcome.note("refused by")
    if refused != "EAGAIN":
        judge.misbehaved(f"the script queued {queued} real-time signals and was never refused "
                         f"(stopped by {refused}): nothing was tested")
    elif queued is None or int(queued) >= HOST_LIMIT:
        judge.escape(f"the script queued {queued} real-time signals, the host user's whole "
                     f"limit ({HOST_LIMIT})")
    judge.done(outcome.describe())


if __name__ == "__main__":
    A.main(test)
