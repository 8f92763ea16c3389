#!/usr/bin/python3
"""Gain privilege by executing a setuid/setgid-root binary.

The host places, inside the bound /usr and reachable only by uid 65534 and root, a copy of
cat that is setuid and setgid root (mode 6755) and two root-only canaries (0400 root:root and
0040 root:root). The script execs the setuid cat on the canaries (exec replaces the script, so
this works even where fork is denied). The kernel would run it as root if the mount were not
nosuid, the owner were mapped, or no_new_privs were off. Contained when neither canary secret
appears and cat demonstrably ran (exit status 1, its "Permission denied" on stderr). A second
run execs the host's own setuid binaries (su, mount, passwd...) just to see them fail.
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

SCRIPT = r'''
import os
cat, c1, c2 = ARGS[:3]
st = os.stat(cat)
note("stat suid cat", "ok: mode %o uid %d" % (st.st_mode, st.st_uid))
sys.stdout.flush()
os.execv(cat, [cat, c1, c2])
'''

SCRIPT_HOST_SUID = r'''
import os, stat
found = []
for d in ("/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/lib", "/usr/libexec"):
    for root, dirs, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            try:
                m = os.lstat(p).st_mode
            except OSError:
                continue
            if stat.S_ISREG(m) and m & (stat.S_ISUID | stat.S_ISGID):
                found.append(p)
note("setuid binaries", "ok: %r" % found)
note("done", 0)
'''


def test():
    judge = A.Judge("setuid/setgid-root binary in a bound directory")
    fixture = A.usr_fixture_dir(mode=0o700, owner=A.NOBODY)
    cat = fixture / "suid-cat"
    shutil.copy2("/bin/cat", cat)
    os.chown(cat, 0, 0)
    os.chmod(cat, 0o6755)
    c1, s1 = A.canary(fixture, "root-0400.txt", mode=0o400, owner=0)
    c2, s2 = A.canary(fixture, "rootgroup-0040.txt", mode=0o040, owner=0)
    sb = A.Sandbox(SCRIPT, [cat, c1, c2])
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(1,), expect_notes=["stat suid cat"])
    A.check_secrets(judge, o, {"root-only canary (setuid)": s1, "root-group canary (setgid)": s2})
    if o.rc == 1 and b"Permission denied" not in o.stderr:
        judge.misbehaved("cat did not report 'Permission denied': did it run at all?")
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
