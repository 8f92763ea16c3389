#!/usr/bin/python3
"""See host processes: their command lines, environments and status through /proc.

A host process (running as the sandbox's own host uid, so permissions would allow it) carries
a secret in its argv and environment. The script enumerates every /proc entry it can see,
guesses pids around the victim's host pid, and reads /proc/net/unix and /proc/net/tcp for host
socket names. Contained when neither secret appears in the output.
"""
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os
victim = int(ARGS[0])
pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
note("visible pids", "ok: %r" % pids)
for pid in sorted(set(pids + list(range(max(1, victim - 5), victim + 5)) + [victim])):
    for name in ("cmdline", "environ", "status", "comm"):
        r = attempt("read /proc/%d/%s" % (pid, name),
                    lambda: open("/proc/%d/%s" % (pid, name), "rb").read())
        if isinstance(r, bytes):
            print("DATA", pid, name, r[:2000])
for t in ("unix", "tcp", "tcp6", "udp", "netlink", "packet"):
    r = attempt("read /proc/net/" + t, lambda: open("/proc/net/" + t, "rb").read())
    if isinstance(r, bytes):
        print("DATA net", t, r[:20000])
note("done", 0)
'''


def test():
    judge = A.Judge("host processes' argv/environment and host socket names via /proc")
    argv_secret = A.new_secret()
    env_secret = A.new_secret()
    sock_secret = A.new_secret()
    victim = subprocess.Popen([argv_secret, "120"], executable="/bin/sleep", user=A.NOBODY,
                              group=A.NOBODY, extra_groups=[], env={"VICTIM_SECRET": env_secret},
                              stdin=subprocess.DEVNULL)
    A.at_cleanup(lambda: (victim.kill(), victim.wait()))
    host_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    host_sock.bind("\0" + sock_secret)
    host_sock.listen()
    sb = A.Sandbox(SCRIPT, [victim.pid])
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    A.check_secrets(judge, o, {"host process argv": argv_secret,
                               "host process environment": env_secret,
                               "host abstract socket name": sock_secret})
    judge.check(victim.poll() is None, "the host victim process died")
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
