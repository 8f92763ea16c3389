#!/usr/bin/python3
"""Read the host's /etc/shadow, /etc/gshadow, /etc/sudoers, SSH host keys and root's files.

The host's real lines are the secrets: no line of the host's /etc/shadow or gshadow (nor the
SSH host private keys' base64, nor a canary placed in /root) may appear in the output. The
script reads those paths directly and via /proc/self/root, /proc/1/root and ../ chains, and
tries to find any other shadow file in the sandbox's tree.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import glob, os
targets = ["/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/sudoers", "/root/.bash_history",
           "/root/.ssh/id_rsa", "/root/.ssh/authorized_keys"] + ARGS
targets += glob.glob("/etc/ssh/ssh_host_*_key")
for t in targets:
    for v in (t, "/proc/self/root" + t, "/proc/1/root" + t, "/../../.." + t):
        r = attempt("read " + v, lambda v=v: open(v, "rb").read())
        if isinstance(r, bytes):
            print("DATA", v, r[:4000])
for p in glob.glob("/etc/**/*shadow*", recursive=True) + glob.glob("/tmp/**", recursive=True):
    r = attempt("read " + p, lambda p=p: open(p, "rb").read())
    if isinstance(r, bytes):
        print("DATA", p, r[:4000])
note("done", 0)
'''


def test():
    judge = A.Judge("host /etc/shadow, gshadow, SSH host keys, /root")
    secrets = {}
    for path in ("/etc/shadow", "/etc/gshadow"):
        try:
            lines = open(path).read().splitlines()
        except OSError:
            continue
        for line in lines:
            if line.count(":") >= 2 and len(line) > 12:
                secrets[f"{path} line {line.split(':')[0]}"] = line
    for key in sorted(os.listdir("/etc/ssh")) if os.path.isdir("/etc/ssh") else []:
        if key.startswith("ssh_host_") and key.endswith("_key"):
            body = [l for l in open(f"/etc/ssh/{key}").read().splitlines() if "-----" not in l]
            if body:
                secrets[f"/etc/ssh/{key}"] = body[1] if len(body) > 1 else body[0]
    extra = []
    if os.path.isdir("/root"):
        path, secret = A.canary("/root", f".pysandbox-canary-{A.new_marker()[-12:]}", 0o600)
        secrets["/root canary"] = secret
        extra.append(str(path))
    if not secrets:
        raise A.Verdict("no host secret to look for (no /etc/shadow?)")
    sb = A.Sandbox(SCRIPT, extra)
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    A.check_secrets(judge, o, secrets)
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
