#!/usr/bin/python3
"""Use up the host user's inotify instances, so that its other processes get none.

The kernel counts inotify instances and watches per host user across every user namespace
(fs.inotify.max_user_instances, 128 by default): an instance a sandboxed script creates counts
for the host user the script runs as. The script creates instances until the kernel refuses,
and watches on files of its own /tmp until it refuses those too, and holds them. Meanwhile a
process of the same host user outside any sandbox creates one instance and adds one watch.
Contained when it can, and the script was refused (EPERM from the seccomp filter, which the
shipped profiles give no inotify; else EMFILE/ENOSPC) well before the host's limit, and, read
from the host in the sandbox's user namespace (nsenter), that namespace's own counts are the
profile's: limits.inotify_instances and inotify_watches (8, 1024), no fanotify group or mark.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
instances = []
refused = "never"
for i in range(1000):
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        refused = errno.errorcode.get(ctypes.get_errno(), "?")
        break
    instances.append(fd)
watches = 0
watch_refused = "never"
if instances:
    os.makedirs("/tmp/watched", exist_ok=True)
    for i in range(100000):
        path = "/tmp/watched/%d" % i
        open(path, "wb").close()
        if libc.inotify_add_watch(instances[0], path.encode(), 0x2) < 0:
            watch_refused = errno.errorcode.get(ctypes.get_errno(), "?")
            break
        watches += 1
note("instances", str(len(instances)))
note("refused by", refused)
note("watches", str(watches))
note("watch refused by", watch_refused)
hold("watching")
note("done", 0)
'''

CHECK = r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_CLOEXEC)
if fd < 0:
    print("no instance", ctypes.get_errno())
elif libc.inotify_add_watch(fd, b"/", 0x2) < 0:
    print("no watch", ctypes.get_errno())
else:
    print("watching")
'''


def host_can_watch() -> str:
    uid = A.env.expected_host_uid()
    prefix = [] if uid == os.geteuid() else [
        "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    done = subprocess.run(prefix + ["/usr/bin/python3", "-c", CHECK], capture_output=True,
                          text=True, timeout=30)
    return (done.stdout + done.stderr).strip()


BOUNDS = {"max_inotify_instances": 8, "max_inotify_watches": 1024, "max_fanotify_groups": 0,
          "max_fanotify_marks": 0}


def sandbox_counts(pid: int) -> dict[str, str]:
    """/proc/sys/user as the sandbox's user namespace sees it: its own per-user counts."""
    read = "; ".join(f"cat /proc/sys/user/{name}" for name in BOUNDS)
    done = subprocess.run(["nsenter", "--user", "--preserve-credentials", f"--target={pid}", "sh", "-c", read],
                          capture_output=True, text=True, timeout=30)
    return dict(zip(BOUNDS, done.stdout.split())) if done.returncode == 0 else {
        "nsenter": done.stderr.strip()}


def host_limit(name: str) -> int:
    with open(f"/proc/sys/fs/inotify/{name}") as f:
        return int(f.read())


def test():
    judge = A.Judge("inotify in a sandbox uses up its host user's instances")
    with A.Sandbox(SCRIPT, []) as sandbox:
        if not sandbox.wait_ready("watching"):
            judge.misbehaved("the script never reported its instances")
        counts = sandbox_counts(sandbox.python().pid)
        if counts != {name: str(bound) for name, bound in BOUNDS.items()}:
            judge.escape(f"the sandbox's user namespace allows {counts}, not {BOUNDS}")
        answer = host_can_watch()
        if answer != "watching":
            judge.escape(f"a host process of the script's user could not watch a file while the "
                         f"sandbox held its instances: {answer!r}")
        sandbox.go()
    outcome = A.check_behaved(judge, sandbox, allowed=(0,), expect_notes=["done"])
    instances, watches = int(outcome.note("instances") or 0), int(outcome.note("watches") or 0)
    if outcome.note("refused by") == "never" or (
            instances and outcome.note("watch refused by") == "never"):
        judge.misbehaved(f"the script was never refused ({instances} instances, {watches} "
                         "watches): nothing was tested")
    elif instances >= host_limit("max_user_instances") // 2:
        judge.escape(f"the script took {instances} inotify instances of the host user's "
                     f"{host_limit('max_user_instances')}")
    elif watches >= host_limit("max_user_watches") // 2:
        judge.escape(f"the script took {watches} inotify watches of the host user's "
                     f"{host_limit('max_user_watches')}")
    judge.done(outcome.describe())


if __name__ == "__main__":
    A.main(test)
