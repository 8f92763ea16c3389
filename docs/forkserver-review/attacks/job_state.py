# What a job holds at its first line: fds, caps, NNP, seccomp filters, uid map, mounts, /proc masks, /proc/1 (init mode).
# Observed c5619ab root+nobody, default & datascience: fds 0,1,2 + policy socket 4 only; Cap* 0; NNP 1; Seccomp_filters 2;
# init mode /proc/1/{mem,fd,fdinfo,root,environ} EACCES; kill(1,9) ignored; no writable dir but per-job /tmp,/dev/shm - CONTAINED.
import json
CODE = r'''
import os, json
out = {}
out["fds"] = {}
for fd in os.listdir("/proc/self/fd"):
    try: out["fds"][fd] = os.readlink("/proc/self/fd/" + fd)
    except OSError: pass
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
out["status"] = {k: st.get(k, "").strip() for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp", "Seccomp_filters", "NSpid")}
out["uid_map"] = open("/proc/self/uid_map").read().split()
out["pids"] = sorted(p for p in os.listdir("/proc") if p.isdigit())
probe = {}
for path in ("/proc/1/mem", "/proc/1/environ", "/proc/1/fd", "/proc/1/fdinfo/5", "/proc/1/fd/5", "/proc/sysrq-trigger", "/proc/kallsyms", "/proc/sys/kernel/hostname", "/proc/1/root/"):
    try:
        if path.endswith("/fd"):
            probe[path] = "listed " + str(os.listdir(path))
        elif path.endswith("/"):
            probe[path] = "listed " + str(os.listdir(path)[:5])
        else:
            fd = os.open(path, os.O_RDWR if "sys" in path or "mem" in path else os.O_RDONLY)
            probe[path] = "OPENED " + repr(os.read(fd, 40)); os.close(fd)
    except OSError as e:
        probe[path] = e.strerror
out["probe"] = probe
try:
    os.kill(1, 9); out["kill1"] = "sent"
except OSError as e:
    out["kill1"] = e.strerror
out["writable"] = [p for p in ("/", "/dev", "/dev/shm", "/etc", "/usr", "/var/tmp", "/run", "/home", "/root", "/opt") if os.path.isdir(p) and os.access(p, os.W_OK)]
out["mounts"] = [l.split()[4] + " " + l.split()[-3] for l in open("/proc/self/mountinfo")]
print(json.dumps(out))
'''
JOBS = [{"id": "default", "code": CODE}]
def check(results, who):
    bad = []
    for k, r in results.items():
        if r["status"] != "ok":
            return f"job {k} status {r['status']} {r.get('stderr','')[-300:]}"
        o = json.loads(r["stdout"])
        print(json.dumps(o, indent=1))
        extra = [fd for fd in o["fds"] if fd not in ("0", "1", "2", "3", "4")]
        if extra: bad.append(f"extra fds {extra}")
        if o["status"]["CapEff"].strip("0") or o["status"]["CapBnd"].strip("0"): bad.append("caps left")
        if o["status"]["NoNewPrivs"] != "1": bad.append("no NNP")
        if any(v.startswith("OPENED") and v != "OPENED b''" and not p.endswith("environ") for p, v in o["probe"].items()): bad.append("opened something in /proc")
    return "CONTAINED" if not bad else "FINDING: " + "; ".join(bad)
