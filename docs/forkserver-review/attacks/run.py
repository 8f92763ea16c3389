#!/usr/bin/env python3
# PLAIN=1: plain `batch` instead of `batch --fork` (comparison); V=1: print every result.
"""Runner: python3 run.py ATTACK.py [as=root|nobody] [extra batch args...]
Each attack module defines JOBS (list of job dicts) and check(results) -> str (host-side verdict).
Runs `pysandbox batch --fork` from the review worktree and prints the verdict."""
import json, os, subprocess, sys, importlib.util
PYSANDBOX = os.environ.get("PYSANDBOX", "/work/wt/forkreview/build/bin/pysandbox")
path, who, extra = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "root"), sys.argv[3:]
spec = importlib.util.spec_from_file_location("attack", path); mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
jobs = mod.JOBS() if callable(mod.JOBS) else mod.JOBS
args = getattr(mod, "ARGS", []) + extra
cmd = [PYSANDBOX, "batch", *([] if os.environ.get("PLAIN") else ["--fork"]), *args, "-"]
if who == "nobody":
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
if hasattr(mod, "before"): mod.before(who)
proc = subprocess.run(cmd, input="".join(json.dumps(j) + "\n" for j in jobs), capture_output=True,
                      text=True, timeout=getattr(mod, "HOST_TIMEOUT", 120), cwd="/tmp")
results = {}
for line in proc.stdout.splitlines():
    r = json.loads(line); results[r["id"]] = r
if os.environ.get("V"):
    for k, r in results.items(): print(k, r["status"], repr(r.get("stdout"))[:2000], repr(r.get("stderr"))[-600:], r.get("error") or r.get("sandbox_error") or "")
    print("rc", proc.returncode, proc.stderr[-2000:])
print(f"[{who}] rc={proc.returncode} verdict: {mod.check(results, who)}")
