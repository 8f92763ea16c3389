# DoS: does the zygote live under the profile wall/CPU limit? 4 x 2 s busy jobs at -j 1, default 5 s profile.
# Observed c5619ab: all 4 ok in 8.3 s (root) - CONTAINED.
import json
ARGS = ["-j", "1"]
JOBS = [{"id": i, "code": "import time; t=time.time()\nwhile time.time()-t < 2: pass\nprint('done')"} for i in range(1, 5)]
def check(results, who):
    st = {k: r["status"] for k, r in results.items()}
    bad = {k: (r["status"], r.get("stderr", "")[-200:], (r.get("error") or {})) for k, r in results.items() if r["status"] != "ok"}
    return "CONTAINED (all ok)" if not bad else f"FINDING: {bad}"
