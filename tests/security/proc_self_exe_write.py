#!/usr/bin/python3
"""Overwrite the executables behind /proc/self/exe and /proc/1/exe (CVE-2019-5736 style).

/proc/1/exe is the pysandbox binary itself (init is forked from the supervisor; through a
kernel, the kernel program pysandbox execs), /proc/self/exe the interpreter. To make plain permissions no obstacle, the test runs a copy of pysandbox that
is owned by the sandbox's host uid (as when a user builds pysandbox themselves). The script
opens both through /proc for writing (O_WRONLY, O_RDWR, O_APPEND, O_TRUNC), truncates,
chmods, opens them O_PATH and re-opens through /proc/self/fd, and retries after the
supervisor would have stopped executing. Contained when the host copies of pysandbox (and of
the kernel program) and the host interpreter are unchanged.
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os, time
targets = ["/proc/self/exe", "/proc/1/exe", "/proc/2/exe", "/proc/1/task/1/exe"]
for t in targets:
    attempt("readlink " + t, os.readlink, t)
    for flags, label in ((os.O_WRONLY, "O_WRONLY"), (os.O_RDWR, "O_RDWR"),
                         (os.O_WRONLY | os.O_APPEND, "O_APPEND"),
                         (os.O_WRONLY | os.O_TRUNC, "O_TRUNC")):
        fd = attempt("open %s %s" % (t, label), os.open, t, flags)
        if isinstance(fd, int):
            attempt("write %s %s" % (t, label), os.pwrite, fd, b"PWNED", 0)
            os.close(fd)
    attempt("truncate " + t, os.truncate, t, 0)
    attempt("chmod " + t, os.chmod, t, 0o777)
    pfd = attempt("open O_PATH " + t, os.open, t, os.O_PATH)
    if isinstance(pfd, int):
        attempt("reopen /proc/self/fd of " + t,
                lambda: os.write(os.open("/proc/self/fd/%d" % pfd, os.O_WRONLY), b"PWNED"))
note("done", 0)
'''


def test():
    judge = A.Judge("writes to /proc/self/exe and /proc/1/exe (a pysandbox owned by the uid)")
    d = A.shared_dir(mode=0o755, owner=A.NOBODY)
    # The build tree mirrors the install tree: bin/pysandbox finds ../share/pysandbox/profiles.
    (d / "bin").mkdir()
    binary = d / "bin" / "pysandbox"
    shutil.copy2(A.PYSANDBOX, binary)
    data = os.path.join(os.path.dirname(os.path.realpath(A.PYSANDBOX)), "..", "share", "pysandbox")
    if os.path.isdir(data):
        shutil.copytree(data, d / "share" / "pysandbox")
    # And ../libexec/pysandbox-kernel, which `pysandbox kernel` execs: through a kernel it is the
    # supervisor, so /proc/1/exe.
    kernel = os.path.join(os.path.dirname(os.path.realpath(A.PYSANDBOX)), "..", "libexec",
                          "pysandbox-kernel")
    programs = [binary]
    if os.path.exists(kernel):
        (d / "libexec").mkdir()
        programs.append(d / "libexec" / "pysandbox-kernel")
        shutil.copy2(kernel, programs[-1])
    for root, dirs, files in os.walk(d):
        for name in dirs + files:
            os.chown(os.path.join(root, name), A.NOBODY, A.NOBODY)
    os.chown(binary, A.NOBODY, A.NOBODY)
    os.chmod(binary, 0o755)
    interpreter = os.path.realpath("/usr/bin/python3")
    before = {str(p): A.file_state(p) for p in programs}
    before[interpreter] = A.file_state(interpreter)
    sb = A.Sandbox(SCRIPT, binary=str(binary))
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    for path, state in before.items():
        if A.file_state(path) != state:
            judge.escape(f"{path} was modified")
    writes = [w for w in o.succeeded("write ") + o.succeeded("truncate ") + o.succeeded("chmod ")
              + o.succeeded("reopen ")]
    if writes:
        judge.escape("the script reports success for: " + ", ".join(writes[:5]))
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
