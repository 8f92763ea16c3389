#!/usr/bin/python3
"""Stop another sandbox from starting by keeping descriptors in flight.

The kernel refuses to pass a descriptor over a unix socket (SCM_RIGHTS, ETOOMANYREFS) once the
sender's user has more of them in flight, unread, than the sender's RLIMIT_NOFILE; every sandbox
of one host user counts as that user. Run A sends copies of a descriptor into a socket pair of
its own and never reads them, until the kernel refuses more and it holds at least its own
limit's worth; while A holds them, run B starts and runs a line of Python. Contained when B runs
to its end as usual: its setup, which hands the supervisor descriptors of its own (the seccomp
listener, /tmp/work), is not stopped by A's.
A must have put at least its own open-files limit's worth in flight, else nothing was tested.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

FLOODER = r'''
import errno, os, resource, socket, time
limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
a.setblocking(False)
sent = 0
stopped = "never"
# Until the kernel refuses more, once this run holds at least its own limit's worth. Another
# sandbox of the same host user holding descriptors (this attack through another front, run at
# the same time) makes the kernel refuse early: wait for it to end, then try again.
for attempt_number in range(600):
    try:
        socket.send_fds(a, [b"x"], [0] * 250)
        sent += 250
    except OSError as e:
        stopped = errno.errorcode.get(e.errno, str(e.errno))
        if sent >= limit or e.errno != errno.ETOOMANYREFS:
            break
        time.sleep(0.05)
note("in flight", str(sent))
note("stopped by", stopped)
note("limit", str(limit))
hold("flooded")
note("done", 0)
'''

STARTER = r'''
note("done", 0)
'''


def test():
    judge = A.Judge("descriptors kept in flight by one run stop another run's setup")
    # A waits while B starts, runs and ends (HOLDING_TIMEOUT).
    with A.Sandbox(FLOODER, [], timeout=A.HOLDING_TIMEOUT) as a:
        if not a.wait_ready("flooded"):
            judge.misbehaved("run A never reported its descriptors in flight")
        b = A.Sandbox(STARTER, [])
        ob = b.run()
        if ob.rc == A.SANDBOX_ERROR:
            tail = ob.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
            judge.escape(f"run A's descriptors in flight stopped run B's setup: {tail[0][:300]}")
        A.check_behaved(judge, b, allowed=(0, A.SANDBOX_ERROR), expect_notes=["done"])
        a.go()
    oa = A.check_behaved(judge, a, allowed=(0,), expect_notes=["done"])
    in_flight, limit = oa.note("in flight"), oa.note("limit")
    if in_flight is None or limit is None or int(in_flight) < int(limit):
        judge.misbehaved(f"run A put {in_flight} descriptors in flight, fewer than its limit "
                         f"({limit}; stopped by {oa.note('stopped by')}): nothing was tested")
    judge.done(oa.describe() + "\n" + ob.describe())


if __name__ == "__main__":
    A.main(test)
