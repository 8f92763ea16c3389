#!/usr/bin/python3
"""Leave set-uid/set-gid programs, FIFOs, sockets and device nodes in a --workdir.

--workdir DIR binds a host directory as /tmp/work. The mount is nosuid/nodev/noexec inside, but
the host sees the files as they are: a set-uid copy of a program, a set-gid directory, a FIFO
that blocks whoever opens it, a socket or a device node left there acts on the host once a host
user (or a later, less careful tool) touches DIR. The script copies /usr/bin/cat in and chmods
it 6755 (and fchmods another copy 4755), creates a file with open(O_CREAT, 06755), makes a
set-gid directory (mkdir 02775, chmod 06775) with a subdirectory that would inherit the bit,
chmods /tmp/work itself 02777, makes FIFOs (mkfifo, mknod), binds an AF_UNIX socket, mknods
character devices (1:3, and 0:0, the overlayfs "whiteout" the kernel lets anyone create) and a
block device, and tries a file capability (security.capability). It writes three ordinary
files, holds (the host looks at DIR), then tries all of it once more and exits.

Contained when, walking DIR with lstat during the hold AND after the run, no entry (DIR itself
included) has S_ISUID or S_ISGID, none is a FIFO, socket, character or block device, none
carries security.capability, and the three ordinary files arrived in DIR with their content
(so "stripped" is told from "nothing works"). pysandbox runs as uid 65534 (setpriv) in both
modes, the caller that cannot fix anything up as root afterwards; in PYSANDBOX_AS=root mode it
also runs as root.
"""
import os
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

RUN_ONLY = (  # no session, batch or mcp variant (attack.py, PYSANDBOX_VIA)
    "--workdir: a session, a batch job or an MCP call has no host directory bound as "
    "/tmp/work; what a cell leaves "
    "reaches the host only as --output-dir copies"
)

SCRIPT = r'''
import os, shutil, socket, stat
W = "/tmp/work"
for i in range(3):
    with open("%s/plain-%d.txt" % (W, i), "w") as f:
        f.write("plain %d %s\n" % (i, MARKER))
socks = []

def unix_socket(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(1)
    socks.append(s)

def fchmod_copy(path, mode):
    shutil.copyfile("/usr/bin/cat", path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)

def creat(path, mode):
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, mode))

# A v2 file capability granting everything (what setcap =ep writes).
CAP = bytes.fromhex("01000002ffffffffffffffff0000000000000000")

def attack(round):
    p = lambda name: "%s/%s-%s" % (W, round, name)
    attempt(round + " copy cat", shutil.copyfile, "/usr/bin/cat", p("suid-cat"))
    attempt(round + " chmod 6755", os.chmod, p("suid-cat"), 0o6755)
    attempt(round + " fchmod 4755", fchmod_copy, p("suid-cat2"), 0o4755)
    attempt(round + " fchmodat2 2755",
            lambda: syscall(452, -100, p("suid-cat").encode(), 0o2755, 0))
    attempt(round + " open O_CREAT 06755", creat, p("created-6755"), 0o6755)
    attempt(round + " mkdir 02775", os.mkdir, p("sgid-dir"), 0o2775)
    attempt(round + " chmod dir 06775", os.chmod, p("sgid-dir"), 0o6775)
    attempt(round + " mkdir in sgid dir", os.mkdir, p("sgid-dir") + "/inherits")
    attempt(round + " chmod /tmp/work 02777", os.chmod, W, 0o2777)
    attempt(round + " mkfifo", os.mkfifo, p("fifo"))
    attempt(round + " mknod fifo", os.mknod, p("fifo2"), stat.S_IFIFO | 0o666)
    attempt(round + " bind unix socket", unix_socket, p("sock"))
    attempt(round + " mknod socket", os.mknod, p("sock2"), stat.S_IFSOCK | 0o666)
    attempt(round + " mknod char 1:3", os.mknod, p("null"), stat.S_IFCHR | 0o666, os.makedev(1, 3))
    attempt(round + " mknod char 0:0", os.mknod, p("whiteout"), stat.S_IFCHR | 0o666, 0)
    attempt(round + " mknod block 7:0", os.mknod, p("loop0"), stat.S_IFBLK | 0o666,
            os.makedev(7, 0))
    attempt(round + " setxattr security.capability", os.setxattr, p("suid-cat"),
            "security.capability", CAP)

attack("during")
hold()
attack("after")
note("done", 0)
'''

FORBIDDEN_TYPES = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
                   stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}


def inspect(judge: A.Judge, root: str, when: str) -> None:
    """Walk ``root`` (itself included) with lstat; record every forbidden bit or type."""
    found = []
    paths = [root]
    for dirpath, dirnames, filenames in os.walk(root):
        paths += [os.path.join(dirpath, n) for n in dirnames + filenames]
    for path in paths:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        rel = os.path.relpath(path, root)
        kind = FORBIDDEN_TYPES.get(stat.S_IFMT(st.st_mode))
        if kind:
            found.append(f"{rel} is {kind}")
        if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
            found.append(f"{rel} has mode {stat.S_IMODE(st.st_mode):04o}")
        if not stat.S_ISLNK(st.st_mode):
            try:
                os.getxattr(path, "security.capability", follow_symlinks=False)
                found.append(f"{rel} has a file capability")
            except OSError:
                pass
    if found:
        judge.escape(f"{when}, DIR holds " + ", ".join(found[:12])
                     + (f" (+{len(found) - 12} more)" if len(found) > 12 else ""))


def one_run(judge: A.Judge, as_nobody: bool) -> str:
    who = "nobody" if as_nobody else "root"
    parent = A.shared_dir()
    workdir = parent / f"workdir-{who}"
    workdir.mkdir(mode=0o755)
    os.chown(workdir, A.NOBODY, A.NOBODY)
    os.chmod(workdir, 0o755)
    with A.Sandbox(SCRIPT, options=["--workdir", str(workdir)], timeout="15s",
                   as_nobody=as_nobody) as sb:
        if sb.wait_ready():
            inspect(judge, str(workdir), f"during the run (caller {who})")
        else:
            judge.misbehaved(f"the script never reached the hold point (caller {who})")
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    inspect(judge, str(workdir), f"after the run (caller {who})")
    for i in range(3):
        path = workdir / f"plain-{i}.txt"
        want = f"plain {i} {sb.marker}\n".encode()
        if A.read_bytes(str(path)) != want:
            judge.misbehaved(f"the ordinary file plain-{i}.txt did not arrive in DIR intact "
                             f"(caller {who}): nothing works, so nothing is proven")
    return f"=== caller {who}\n{o.describe()}"


def test():
    judge = A.Judge("set-uid/set-gid files, FIFOs, sockets and devices left in --workdir")
    callers = [True] if A.RUN_AS == "nobody" else [True, False]
    diagnostics = [one_run(judge, as_nobody) for as_nobody in callers]
    judge.done("\n".join(diagnostics))


if __name__ == "__main__":
    A.main(test)
