#!/usr/bin/python3
"""Read the caller's environment from inside the script's own process.

The caller has secrets in its environment (API keys, tokens) and also sets variables that the
interpreter would act on (PYTHONSTARTUP, PYTHONPATH, LD_PRELOAD pointing at host files that
print a secret). The script dumps os.environ, /proc/self/environ and scans its own memory for
the secrets. Contained when no secret appears and none of the caller's interpreter variables
took effect (their payloads print a secret, so either way the output decides).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os, re
print("ENV", dict(os.environ), flush=True)
print("PROCENV", open("/proc/self/environ", "rb").read(), flush=True)
found = set()
with open("/proc/self/mem", "rb") as mem:
    for line in open("/proc/self/maps").read().splitlines():
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        # gVisor's [vsyscall] is readable, above the offsets a file can seek to.
        if "r" not in line.split()[1] or hi - lo > (256 << 20) or lo >= 1 << 63:
            continue
        try:
            mem.seek(lo)
            chunk = mem.read(hi - lo)
        except OSError:
            continue
        found.update(re.findall(rb"SECRET-[0-9a-f]{32}", chunk))
print("MEMORY", sorted(found), flush=True)
note("done", 0)
'''


def test():
    judge = A.Judge("caller's environment variables inside the script")
    d = A.shared_dir()
    startup_secret = A.new_secret()
    startup = A.write_file(d / "startup.py", f"print({startup_secret!r})\n")
    A.write_file(d / "sitecustomize.py", f"print({startup_secret!r})\n")
    secrets = {
        "API_TOKEN": A.new_secret(),
        "GITHUB_TOKEN": A.new_secret(),
        "DATABASE_URL": "postgres://user:" + A.new_secret() + "@db/x",
    }
    env = dict(os.environ, **secrets, PYTHONSTARTUP=str(startup), PYTHONPATH=str(d),
               PYTHONINSPECT="1", PYTHONHOME=str(d))
    sb = A.Sandbox(SCRIPT, env=env)
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    A.check_secrets(judge, o, dict(secrets, **{"PYTHONSTARTUP/PYTHONPATH payload": startup_secret}))
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
