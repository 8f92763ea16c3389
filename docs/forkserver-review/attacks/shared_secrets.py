# Cross-job: state every sibling inherits from the zygote: str hash secret, ASLR layout, AT_RANDOM (stack canary,
# pointer guard), random, urandom (control). Observed c5619ab, root and nobody, default and datascience:
# FINDING hash, id(None), heap id, libc printf address, AT_RANDOM bytes identical across jobs; random/urandom differ.
import json
CODE = r'''
import os, sys, json, ctypes, random, struct
auxv = open("/proc/self/auxv", "rb").read()
at_random = None
for i in range(0, len(auxv), 16):
    k, v = struct.unpack("QQ", auxv[i:i+16])
    if k == 25: at_random = v
canary = None
try:
    with open("/proc/self/mem", "rb") as m:
        m.seek(at_random); canary = m.read(16).hex()
except OSError as e:
    canary = "unreadable " + e.strerror
libc = ctypes.CDLL(None)
print(json.dumps({"hash": hash("pysandbox-secret"), "id_None": id(None), "heap_obj": id(object()),
  "libc_printf": ctypes.cast(libc.printf, ctypes.c_void_p).value, "at_random_bytes": canary,
  "random": random.random(), "urandom": os.urandom(8).hex()}))
'''
JOBS = [{"id": 1, "code": CODE}, {"id": 2, "code": CODE}]
def check(results, who):
    a, b = (json.loads(results[i]["stdout"]) for i in (1, 2))
    same = [k for k in a if a[k] == b[k]]
    return ("FINDING: shared between sibling jobs: " + ", ".join(same)) if same else "CONTAINED"
