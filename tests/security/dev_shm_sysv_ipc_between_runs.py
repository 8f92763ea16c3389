#!/usr/bin/python3
"""Share memory or messages between two concurrent runs, or with the host: SysV shm, message
queues and semaphores, POSIX shm (/dev/shm) and POSIX message queues.

Run A creates, under fixed keys/names, a SysV shared-memory segment, a message queue and a
semaphore set holding (or carrying) a secret, plus /dev/shm and /tmp files and a POSIX queue,
and is held open. Run B, started meanwhile, attaches to the same keys, scans ids 0..4095,
reads /proc/sysvipc/*, and opens the same names. The host also owns a SysV segment and a
/dev/shm file with a host secret under other fixed keys. Contained when B never saw A's
secret, neither run saw the host's, A's objects are not in the host's IPC namespace
(/proc/sysvipc on the host), and the host's objects are untouched.
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

COMMON = r'''
import os
libc.shmget.restype = ctypes.c_int
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.msgget.restype = ctypes.c_int
libc.semget.restype = ctypes.c_int
libc.msgrcv.restype = ctypes.c_ssize_t
libc.msgrcv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long, ctypes.c_int]
IPC_CREAT, IPC_NOWAIT = 0o1000, 0o4000
key, host_key, name, host_name = int(ARGS[0]), int(ARGS[1]), ARGS[2], ARGS[3]
def err():
    return -ctypes.get_errno()
def read_shm(k=None, shmid=None):
    if shmid is None:
        shmid = libc.shmget(k, 0, 0)
        if shmid < 0:
            return err()
    addr = libc.shmat(shmid, None, 0o10000)     # SHM_RDONLY
    if addr in (None, ctypes.c_void_p(-1).value):
        return err()
    return ctypes.string_at(addr, 64)
def read_msg(k):
    q = libc.msgget(k, 0)
    if q < 0:
        return err()
    buf = ctypes.create_string_buffer(8 + 128)
    n = libc.msgrcv(q, buf, 128, 0, IPC_NOWAIT)
    return buf.raw[8:8 + n] if n >= 0 else err()
def show(label, r):
    note(label, r if isinstance(r, int) else "ok: %r" % r)
'''

CREATOR = COMMON + r'''
secret = ARGS[4][::-1].encode()
shmid = libc.shmget(key, 4096, IPC_CREAT | 0o666)
note("A shmget", shmid if shmid >= 0 else err())
if shmid >= 0:
    addr = libc.shmat(shmid, None, 0)
    ctypes.memmove(addr, secret, len(secret))
q = libc.msgget(key, IPC_CREAT | 0o666)
note("A msgget", q if q >= 0 else err())
if q >= 0:
    msg = ctypes.create_string_buffer((1).to_bytes(8, "little") + secret)  # mtype 1, mtext
    note("A msgsnd", libc.msgsnd(q, msg, len(secret), IPC_NOWAIT))
note("A semget", libc.semget(key, 1, IPC_CREAT | 0o666))
for path in ("/dev/shm/" + name, "/tmp/" + name):
    attempt("A write " + path, lambda: open(path, "wb").write(secret))
mq = libc.mq_open(("/" + name).encode(), os.O_CREAT | os.O_RDWR, 0o666, None)
note("A mq_open", mq if mq >= 0 else err())
show("A sees host shm", read_shm(host_key))
attempt("A reads host /dev/shm", lambda: open("/dev/shm/" + host_name, "rb").read())
note("done", 0)
hold("created")
'''

READER = COMMON + r'''
show("B shm by key", read_shm(key))
show("B msg by key", read_msg(key))
note("B semget by key", libc.semget(key, 0, 0) if libc.semget(key, 0, 0) >= 0 else err())
for i in range(4096):
    r = read_shm(shmid=i)
    if isinstance(r, bytes):
        show("B shm id %d" % i, r)
    q = libc.msgrcv(i, ctypes.create_string_buffer(136), 128, 0, IPC_NOWAIT)
    if q >= 0:
        note("B msg id %d" % i, "ok: got one")
show("B sees host shm", read_shm(host_key))
show("B sees host msg", read_msg(host_key))
for path in ("/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem",
             "/dev/shm/" + name, "/tmp/" + name, "/dev/shm/" + host_name):
    r = attempt("B read " + path, lambda: open(path, "rb").read())
    if isinstance(r, bytes):
        print("DATA", path, r, flush=True)
mq = libc.mq_open(("/" + name).encode(), os.O_RDONLY, 0, None)
note("B mq_open", mq if mq >= 0 else err())
note("done", 0)
'''


def host_ipc_keys() -> set[int]:
    keys = set()
    for table in ("shm", "msg", "sem"):
        try:
            lines = open(f"/proc/sysvipc/{table}").read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            keys.add(int(line.split()[0]))
    return keys


def test():
    judge = A.Judge("SysV IPC, /dev/shm and POSIX mqueues between two runs and with the host")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    key = 0x50000000 | (os.getpid() & 0xFFFFFF)
    host_key = key ^ 0x0F000000
    name = f"pysandbox-ipc-{A.new_marker()[-12:]}"
    host_name = name + "-host"
    secret = A.new_secret()
    host_secret = A.new_secret()

    # The host's own objects.
    host_shm = libc.shmget(host_key, 4096, 0o1000 | 0o666)
    if host_shm < 0:
        raise A.Verdict("cannot create the host's SysV segment")
    A.at_cleanup(lambda: libc.shmctl(host_shm, 0, None))  # IPC_RMID
    addr = libc.shmat(host_shm, None, 0)
    ctypes.memmove(addr, host_secret.encode(), len(host_secret))
    host_file = f"/dev/shm/{host_name}"
    A.write_file(host_file, host_secret, mode=0o666)
    A.at_cleanup(lambda: A.remove(host_file))
    before = A.file_state(host_file)

    args = [key, host_key, name, host_name]
    # A waits while B starts, runs and ends (HOLDING_TIMEOUT).
    with A.Sandbox(CREATOR, args + [secret[::-1]], timeout=A.HOLDING_TIMEOUT) as a:
        if not a.wait_ready("created"):
            judge.misbehaved("run A never created its objects")
        if key in host_ipc_keys():
            judge.escape("run A's SysV object appeared in the host's IPC namespace")
        if os.path.exists(f"/dev/shm/{name}"):
            judge.escape(f"run A created /dev/shm/{name} on the host")
            A.remove(f"/dev/shm/{name}")
        b = A.Sandbox(READER, args)
        ob = b.run()
        A.check_behaved(judge, b, allowed=(0,), expect_notes=["done"])
        a.go()
    oa = A.check_behaved(judge, a, allowed=(0,), expect_notes=["done"])
    A.check_secrets(judge, ob, {"run A's secret in run B": secret,
                                "the host's secret in run B": host_secret})
    A.check_secrets(judge, oa, {"the host's secret in run A": host_secret})
    if ctypes.string_at(addr, len(host_secret)) != host_secret.encode():
        judge.escape("the host's SysV segment was modified")
    if A.file_state(host_file) != before:
        judge.escape("the host's /dev/shm file was modified")
    if str(oa.note("A shmget")).startswith("-") or oa.note("A shmget") is None:
        judge.misbehaved("run A could not even create its own segment (nothing was tested)")
    judge.done(oa.describe() + "\n" + ob.describe())


if __name__ == "__main__":
    A.main(test)
