"""A Jupyter client of `pysandbox kernel`, run by test_kernel.py as the caller under test (root
or nobody): Debian's jupyter_client and nbclient, no code of ours on the client's side.

    python3 kernel_client.py SCENARIO

The kernelspec comes from JUPYTER_PATH (test_kernel.py writes it). Prints one JSON object: what
the client saw, for test_kernel.py to judge.
"""

import contextlib
import json
import os
import signal
import sys
import time

import jupyter_client

ANSWER = 30  # seconds any one reply may take
FLOOD = 300  # messages of each kind a channel, in flood_round


def outputs(kc, msg_id: str) -> list:
    """The iopub messages of one request, until its status goes idle."""
    seen = []
    deadline = time.monotonic() + ANSWER
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=ANSWER)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        seen.append({"type": msg["msg_type"], "content": msg["content"]})
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return seen
    raise AssertionError("no idle status for " + msg_id)


def execute(kc, code: str) -> dict:
    msg_id = kc.execute(code)
    reply = kc.get_shell_msg(timeout=ANSWER)
    assert reply["parent_header"]["msg_id"] == msg_id
    return {"reply": reply["content"], "verdict": reply["metadata"].get("pysandbox"),
            "iopub": outputs(kc, msg_id)}


def started(extra_args=(), ip=None):
    km = jupyter_client.KernelManager(kernel_name="pysandbox-test")
    if ip is not None:
        km.ip = ip
    km.start_kernel(extra_arguments=list(extra_args))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=ANSWER)
    return km, kc


@contextlib.contextmanager
def running(extra_args=(), ip=None):
    """A started kernel and its client, shut down (at once) at the end."""
    km, kc = started(extra_args, ip)
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def basics() -> dict:
    km, kc = started()
    try:
        info = kc.kernel_info(reply=True, timeout=ANSWER)["content"]
        seen = {"info": info}
        seen["print"] = execute(kc, "print('hi')\n1+1")
        seen["assign"] = execute(kc, "x = 41")
        seen["kept"] = execute(kc, "x + 1")
        seen["error"] = execute(kc, "def f():\n    return 1/0\nf()")
        seen["stream"] = execute(kc, "import time, sys\nfor i in range(3):\n"
                                     "    print(i, flush=True)\n    time.sleep(0.2)")
        seen["is_complete"] = []
        for code in ("1+1", "for i in range(3):", "f(1,"):
            msg_id = kc.is_complete(code)
            reply = kc.get_shell_msg(timeout=ANSWER)
            assert reply["parent_header"]["msg_id"] == msg_id
            seen["is_complete"].append(reply["content"])
        msg_id = kc.comm_info()
        reply = kc.get_shell_msg(timeout=ANSWER)
        assert reply["parent_header"]["msg_id"] == msg_id
        seen["comm_info"] = reply["content"]
        process = km.provisioner.process
        km.shutdown_kernel(now=False)  # a shutdown_request; jupyter_client kills only after 5 s
        seen["exit"] = process.wait(timeout=ANSWER)
        return seen
    finally:
        kc.stop_channels()
        if km.is_alive():
            km.shutdown_kernel(now=True)


def interrupt() -> dict:
    with running() as (km, kc):
        execute(kc, "y = 7")
        msg_id = kc.execute("import time\nprint('sleeping', flush=True)\ntime.sleep(60)")
        while True:  # the cell has started once its output comes
            msg = kc.get_iopub_msg(timeout=ANSWER)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
                break
        began = time.monotonic()
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=ANSWER)["content"]
        seen = {"reply": reply, "seconds": time.monotonic() - began,
                "after": execute(kc, "y * 6")}
        # A restart: a new sandbox, the state gone.
        km.restart_kernel(now=False)
        kc.wait_for_ready(timeout=ANSWER)
        seen["restarted"] = execute(kc, "y")
        return seen


def timeout() -> dict:
    with running(["--timeout", "1"]) as (km, kc):
        execute(kc, "z = 5")
        seen = {"loop": execute(kc, "while True:\n    pass"),
                "forged": execute(kc, "raise TimeoutError(\"the cell's timeout of 1s was "
                                      "reached\")"),
                "after": execute(kc, "z")}
        return seen


def host_write(path: str) -> dict:
    with running() as (km, kc):
        code = ("import os\nfor p in (%r, '/etc/pysandbox-kernel-escape'):\n"
                "    try:\n        open(p, 'w').write('escaped')\n"
                "    except OSError as e:\n        print(type(e).__name__)\n" % path)
        return {"write": execute(kc, code)}


def hostile() -> dict:
    """Forged, unsigned, replayed and malformed messages on one connection, then a good one on
    the same connection: the kernel reads a connection's messages in order, so by the good one's
    reply every earlier one was dealt with."""
    import hashlib
    import hmac

    import zmq
    from jupyter_client.session import Session

    with running() as (km, kc):
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.linger = 0
        sock.connect("tcp://%s:%d" % (km.ip, km.shell_port))
        forged = {"code": "print('FORGED')", "silent": False}
        Session(key=b"wrong-key").send(sock, "execute_request", content=forged)
        Session(key=b"").send(sock, "execute_request", content=forged)
        good = Session(key=km.session.key)
        msg = good.msg("execute_request", content={"code": "print('ONCE')", "silent": False})
        frames = good.serialize(msg)
        sock.send_multipart(frames)
        sock.send_multipart(frames)  # the replay
        sock.send_multipart([b"<IDS|MSG>", b"x", b"{", b"}"])
        sock.send_multipart([b"no delimiter"])
        sock.send_multipart([b"<IDS|MSG>", frames[2], b"[]", b"[]", b"[]", b"[]"])
        # Rightly signed, but nested 200,000 deep: refused by its bounds (once it was parsed,
        # and the reply's parent header, dumped, overflowed the kernel's stack).
        deep = (b'{"msg_id":"deep","msg_type":"kernel_info_request","session":"s","username":'
                b'"u","version":"5.3","date":"2026-12-07T00:00:00Z","nest":'
                + b"[" * 200000 + b"]" * 200000 + b"}")
        parts = [deep, b"{}", b"{}", b"{}"]
        signature = hmac.new(km.session.key, b"".join(parts), hashlib.sha256).hexdigest()
        sock.send_multipart([b"<IDS|MSG>", signature.encode(), *parts])
        last = good.msg("execute_request", content={"code": "print('LAST')", "silent": False})
        sock.send_multipart(good.serialize(last))
        replies = []
        while True:
            if not sock.poll(ANSWER * 1000):
                raise AssertionError("no reply on the hostile connection")
            _, reply = good.feed_identities(sock.recv_multipart())
            reply = good.deserialize(reply)
            replies.append(reply["parent_header"]["msg_id"])
            if reply["parent_header"]["msg_id"] == last["header"]["msg_id"]:
                break
        texts = []
        while True:  # everything iopub published until the last request's idle
            m = kc.get_iopub_msg(timeout=ANSWER)
            if m["msg_type"] == "stream":
                texts.append(m["content"]["text"])
            if (m["parent_header"].get("msg_id") == last["header"]["msg_id"] and
                    m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"):
                break
        seen = {"replies": replies, "once": msg["header"]["msg_id"],
                "last": last["header"]["msg_id"], "texts": texts,
                "good_after": execute(kc, "6 * 7")}
        return seen


def usage(pid: int) -> dict:
    """The kernel process's resident memory (KiB, VmRSS) and open descriptors, from /proc."""
    with open("/proc/%d/status" % pid) as status:
        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return {"rss_kib": rss, "fds": len(os.listdir("/proc/%d/fd" % pid))}


def settled_usage(pid: int, fds: int) -> dict:
    """usage() once the kernel has closed the connections a test dropped (libzmq closes them
    in its own thread, a moment later): up to 5 s for the descriptors to come down to `fds`."""
    deadline = time.monotonic() + 5
    while True:
        now = usage(pid)
        if now["fds"] <= fds or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


def flood_round(km) -> None:
    """Oversized frames, then hundreds of unsigned, badly signed, malformed and good messages on
    shell, control, stdin and heartbeat; returns once the kernel has dealt with every one (the
    last message on each connection is a good kernel_info_request, read in order after the rest).
    """
    import zmq
    from jupyter_client.session import Session

    context = zmq.Context.instance()
    wrong, unsigned = Session(key=b"wrong-key"), Session(key=b"")
    good = Session(key=km.session.key)
    sockets = []

    def connect(kind, port):
        sock = context.socket(kind)
        sock.linger = 0
        sock.sndhwm = 0  # queue the whole flood on our side; the kernel reads at its pace
        sock.connect("tcp://%s:%d" % (km.ip, port))
        sockets.append(sock)
        return sock

    # Past the kernel's 16 MiB a message: libzmq drops the connection before reading it.
    for port in (km.shell_port, km.control_port, km.stdin_port, km.hb_port):
        big = connect(zmq.REQ if port == km.hb_port else zmq.DEALER, port)
        big.send_multipart([b"<IDS|MSG>", b"0" * 64, b"x" * (20 << 20), b"{}", b"{}", b"{}"])
    # Just under it, badly signed: read, checked and dropped, one after the other.
    near = connect(zmq.DEALER, km.shell_port)
    for _ in range(4):
        near.send_multipart([b"<IDS|MSG>", b"0" * 64, b"{}", b"{}", b"{}", b"x" * (15 << 20)])
    finals = []
    for port in (km.shell_port, km.control_port, km.stdin_port):
        sock = connect(zmq.DEALER, port)
        content = {"code": "print('FLOOD')", "silent": False}
        for i in range(FLOOD):
            wrong.send(sock, "execute_request", content=content)
            unsigned.send(sock, "execute_request", content=content)
            sock.send_multipart([b"<IDS|MSG>", b"", b"{", b"[", b"]", b"}"])
            if port != km.stdin_port:  # answered: the replies pile up unread on our side
                good.send(sock, "kernel_info_request", content={})
        if port != km.stdin_port:
            final = good.msg("kernel_info_request", content={})
            sock.send_multipart(good.serialize(final))
            finals.append((sock, final["header"]["msg_id"]))
    near_final = good.msg("kernel_info_request", content={})
    near.send_multipart(good.serialize(near_final))
    finals.append((near, near_final["header"]["msg_id"]))
    hb = connect(zmq.REQ, km.hb_port)
    for i in range(FLOOD):
        hb.send(b"ping %d" % i)
        if not hb.poll(ANSWER * 1000):
            raise AssertionError("the heartbeat stopped answering")
        hb.recv()
    for sock, msg_id in finals:
        while True:
            if not sock.poll(ANSWER * 1000):
                raise AssertionError("no reply to the last message of a flood")
            _, reply = good.feed_identities(sock.recv_multipart())
            if good.deserialize(reply)["parent_header"].get("msg_id") == msg_id:
                break
    for sock in sockets:
        sock.close()


def flood() -> dict:
    import zmq

    with running() as (km, kc):
        pid = km.provisioner.process.pid
        execute(kc, "x = 1")
        seen = {"before": usage(pid)}
        flood_round(km)
        seen["first"] = settled_usage(pid, seen["before"]["fds"])
        flood_round(km)
        seen["second"] = settled_usage(pid, seen["before"]["fds"])
        # While a cell runs the kernel reads no shell message: what one connection sends
        # meanwhile (200 MiB here) must wait on the sender's side, not in the kernel.
        msg_id = kc.execute("import time\nprint('sleeping', flush=True)\ntime.sleep(3)")
        while True:
            msg = kc.get_iopub_msg(timeout=ANSWER)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
                break
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.linger = 0
        sock.sndhwm = 0
        sock.connect("tcp://%s:%d" % (km.ip, km.shell_port))
        for _ in range(200):
            sock.send_multipart([b"<IDS|MSG>", b"0" * 64, b"{}", b"{}", b"{}", b"x" * (1 << 20)])
        time.sleep(1)  # no event says "queued all it will": time enough to, were it to
        seen["busy"] = usage(pid)
        shell_reply(kc, msg_id)
        sock.close()
        seen["after"] = execute(kc, "x + 41")
        return seen


def load(count: str) -> dict:
    """`count` executions, one in ten failing, through one kernel; its usage after the first
    hundred and at the end; then the kernel program killed with SIGKILL, as a front end can be.
    """
    km, kc = started()
    try:
        pid = km.provisioner.process.pid
        execute(kc, "x = 0")
        seen = {"statuses": {}}
        began = time.monotonic()
        for i in range(1, int(count) + 1):
            code = "1/0" if i % 10 == 0 else "x += 1\nprint(x)" if i % 10 == 5 else "x += 1"
            status = execute(kc, code)["reply"]["status"]
            seen["statuses"][status] = seen["statuses"].get(status, 0) + 1
            if i == 100:
                seen["at_100"] = usage(pid)
        seen["seconds"] = time.monotonic() - began
        seen["end"] = usage(pid)
        seen["x"] = execute(kc, "x")["iopub"]
        os.kill(pid, signal.SIGKILL)
        km.provisioner.process.wait(timeout=ANSWER)
        return seen
    finally:
        kc.stop_channels()
        if km.is_alive():
            km.shutdown_kernel(now=True)


RICH = """\
class Rich:
    def __repr__(self):
        return 'Rich()'
    def _repr_html_(self):
        return '<b>rich</b>'
    def _repr_markdown_(self):
        return '*rich*'
    def _repr_latex_(self):
        return '$rich$'
    def _repr_svg_(self):
        return '<svg xmlns="http://www.w3.org/2000/svg"/>'
    def _repr_json_(self):
        return {'rich': [1, 2]}
    def _repr_png_(self):
        return b'\\x89PNG\\r\\n\\x1a\\n' + bytes(8)
display(Rich(), 'plain')
Rich()
"""

# A cell that goes around display() and hands the driver what no object's methods give: types
# off the list, values of the wrong form, more than the kernel takes. The kernel must drop them.
FORGED = """\
import pysandbox_driver as d
shown = d._current_rich.displays
shown.append({'data': {'text/plain': 'js', 'application/javascript': 'alert(1)',
                       'text/html': 5, 'image/png': 'not a png'}})
shown.append({'data': {'text/plain': 'deep', 'application/json': '[' * 100000}})
shown.append({'data': {'text/plain': 'big', 'text/html': 'x' * (9 << 20)}})
shown.append({'data': {'text/html': 'no plain text'}})
shown.append({'figure': 99})
shown.append('not an object')
shown.append({'data': {'text/plain': 'update of no display'}, 'update': True})
shown.append({'data': {'text/plain': 'long id'}, 'display_id': 'i' * 1000})
shown.append({'clear': 'not a boolean'})
class Huge:
    def _repr_html_(self):
        return 'y' * (9 << 20)
Huge()
"""


def rich() -> dict:
    with running() as (km, kc):
        return {
            "rich": execute(kc, RICH),
            "frame": execute(kc, "import pandas\npandas.DataFrame({'a': [1, 2], 'b': [3, 4]})"),
            "figures": execute(kc, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\n"
                                   "plt.show()\nprint('shown')\nfig = plt.figure()\n"
                                   "plt.plot([2, 1])\ndisplay('between')\n7"),
            "many": execute(kc, "for i in range(100):\n    display(i)"),
            "forged": execute(kc, FORGED),
        }


# What notebooks write: IPython's own display functions, in a cell with no InteractiveShell.
IPYTHON = """\
import sys
eager = 'IPython' in sys.modules
from IPython.display import display, HTML, Markdown
import IPython.display
display(HTML('<b>x</b>'))
IPython.display.display(Markdown('*m*'))
display({'text/html': '<i>raw</i>'}, raw=True)
eager
"""

CLEAR = """\
from IPython.display import clear_output, display
print('before')
display('gone')
clear_output()
"""

# A progress display: cleared and shown anew 50 times, it takes one of the cell's 32 displays.
CLEAR_WAIT = """\
for i in range(50):
    clear_output(wait=True)
    display(i)
"""

UPDATE = """\
from IPython.display import display
handle = display('first', display_id=True)
for i in range(100):
    handle.update(i)
handle.display_id
"""


def ipython() -> dict:
    with running() as (km, kc):
        return {
            "display": execute(kc, IPYTHON),
            "clear": execute(kc, CLEAR),
            "clear_wait": execute(kc, CLEAR_WAIT),
            "update": execute(kc, UPDATE),
            "later": execute(kc, "handle.update('later')"),
            "kept": execute(kc, "x = 5"),
            "pip": execute(kc, "import os\n%pip install requests"),
            "shell": execute(kc, "x += 1\n!ls"),
            "after": execute(kc, "y = (x\n% 3)\nx, y"),
        }


FORGE_ANSWERS = """
import gc
for channel in [o for o in gc.get_objects() if type(o).__name__ == "_Channel"]:
    def send(message, real=channel.send):
        if isinstance(message, dict) and "answer" in message:
            message = dict(message, answer={"found": "yes", "text": "x", "matches": {"a": 1},
                                            "cursor_end": -1})
        if isinstance(message, dict) and "rich" in message:
            message = dict(message, rich={"value": 5}, value=[1], exception="no")
        real(message)
    channel.send = send
"""


def shell_reply(kc, msg_id: str) -> dict:
    reply = kc.get_shell_msg(timeout=ANSWER)
    assert reply["parent_header"]["msg_id"] == msg_id, reply
    return reply["content"]


def complete() -> dict:
    with running(["--timeout", "1"]) as (km, kc):
        execute(kc, "import os\nvalue_one = 1\nvalue_two = 2\n"
                    "class Slow:\n    def __getattr__(self, name):\n"
                    "        import time\n        time.sleep(60)\n"
                    "slow = Slow()")
        seen = {}
        seen["names"] = shell_reply(kc, kc.complete("x = value_", 10))
        seen["attributes"] = shell_reply(kc, kc.complete("os.pat", 6))
        seen["builtin"] = shell_reply(kc, kc.inspect("len(", 4))
        seen["module"] = shell_reply(kc, kc.inspect("os.path.join", 10))
        seen["missing"] = shell_reply(kc, kc.inspect("nothing_here", 3))
        began = time.monotonic()
        seen["slow"] = shell_reply(kc, kc.complete("slow.inner.x", 12))
        seen["slow_seconds"] = time.monotonic() - began
        seen["after"] = execute(kc, "value_one + value_two")
        # The answers and the rich output are the cell's to forge: the driver's channel, patched
        # from a cell, sends members of the wrong types (and none where one is expected).
        execute(kc, FORGE_ANSWERS)
        seen["forged_inspect"] = shell_reply(kc, kc.inspect("len(", 4))
        seen["forged_complete"] = shell_reply(kc, kc.complete("value_", 6))
        seen["forged_execute"] = execute(kc, "1 + 1")
        return seen


def stop_on_error() -> dict:
    with running() as (km, kc):
        # The first cell fails after the others are queued behind it.
        failing = kc.execute("import time\ntime.sleep(0.5)\n1/0")
        queued = kc.execute("print('ran')")
        also = kc.execute("print('ran too')")
        seen = {"failing": shell_reply(kc, failing), "queued": shell_reply(kc, queued),
                "also": shell_reply(kc, also)}
        seen["after"] = execute(kc, "print('after')")
        # stop_on_error false: what is queued still runs.
        tolerated = kc.execute("import time\ntime.sleep(0.5)\n1/0", stop_on_error=False)
        next_one = kc.execute("'next'")
        seen["tolerated"] = shell_reply(kc, tolerated)
        seen["next"] = shell_reply(kc, next_one)
        return seen


def stdin_request(kc, msg_id: str) -> dict:
    """The input_request the cell `msg_id` sent on the stdin channel."""
    request = kc.get_stdin_msg(timeout=ANSWER)
    assert request["msg_type"] == "input_request", request
    assert request["parent_header"]["msg_id"] == msg_id, request
    return request


def answered(kc, msg_id: str) -> dict:
    return {"reply": shell_reply(kc, msg_id), "iopub": outputs(kc, msg_id)}


def stdin() -> dict:
    """input() and getpass() answered through the stdin channel (jupyter_client's
    get_stdin_msg and input), forged answers around a good one, answers the kernel refuses,
    and a wait ended by an interrupt and by the cell's timeout."""
    import zmq
    from jupyter_client.session import Session

    with running(["--timeout", "2"]) as (km, kc):
        seen = {}
        msg_id = kc.execute("name = input('name? ')\nprint('hello', name)\nname",
                            allow_stdin=True)
        seen["request"] = stdin_request(kc, msg_id)["content"]
        kc.input("world")
        seen["answered"] = answered(kc, msg_id)

        msg_id = kc.execute("import getpass\nsecret = getpass.getpass('pin: ')\nlen(secret)",
                            allow_stdin=True)
        seen["password_request"] = stdin_request(kc, msg_id)["content"]
        kc.input("s3cret")
        seen["password"] = answered(kc, msg_id)

        seen["not_allowed"] = answered(kc, kc.execute("input('x? ')", allow_stdin=False))

        # Forged answers first: on the client's own connection (read in order before the good
        # one) unsigned, badly signed and one to another request; from another connection, a
        # signed one under another identity. Then the good one.
        msg_id = kc.execute("print(repr(input('forged? ')))", allow_stdin=True)
        request = stdin_request(kc, msg_id)
        other = zmq.Context.instance().socket(zmq.DEALER)
        other.linger = 0
        other.identity = b"another-client"
        other.connect("tcp://%s:%d" % (km.ip, km.stdin_port))
        km.session.send(other, "input_reply", {"value": "OTHER IDENTITY"},
                        parent=request["header"])
        own = kc.stdin_channel.socket
        for key in (b"", b"wrong-key"):
            own.send_multipart(Session(key=key).serialize(Session(key=key).msg(
                "input_reply", {"value": "BAD KEY"}, parent=request["header"])))
        kc.stdin_channel.send(kc.session.msg("input_reply", {"value": "OTHER PARENT"},
                                             parent={"msg_id": "another-request"}))
        kc.stdin_channel.send(kc.session.msg("input_reply", {"value": "good"},
                                             parent=request["header"]))
        seen["forged"] = answered(kc, msg_id)
        other.close()

        # Answers the cell's input() cannot take: a number, more than 1 MiB; then end of file.
        code = ("for i in range(3):\n    try:\n        input('%d? ' % i)\n"
                "    except (ValueError, EOFError) as e:\n        print(type(e).__name__, e)")
        msg_id = kc.execute(code, allow_stdin=True)
        for value in (5, "x" * ((1 << 20) + 1), "\x04"):
            stdin_request(kc, msg_id)
            kc.stdin_channel.send(kc.session.msg("input_reply", {"value": value}))
        seen["refused"] = answered(kc, msg_id)

        # A prompt that is not UTF-8 (a lone surrogate) is asked all the same, escaped.
        msg_id = kc.execute("input('\\ud800? ')", allow_stdin=True)
        seen["surrogate_request"] = stdin_request(kc, msg_id)["content"]
        kc.input("fine")
        seen["surrogate"] = answered(kc, msg_id)

        # An interrupt ends the wait (KeyboardInterrupt); an answer after it goes nowhere.
        execute(kc, "kept = 6")
        msg_id = kc.execute("input('waiting? ')", allow_stdin=True)
        stdin_request(kc, msg_id)
        km.interrupt_kernel()
        seen["interrupted"] = answered(kc, msg_id)
        kc.input("late")
        seen["after_interrupt"] = execute(kc, "kept * 7")

        # The cell's timeout (2 s) ends it as well, the state kept.
        msg_id = kc.execute("input('never answered? ')", allow_stdin=True)
        stdin_request(kc, msg_id)
        seen["timed_out"] = answered(kc, msg_id)
        seen["after_timeout"] = execute(kc, "kept")
        return seen


def memory(pid: int) -> dict:
    """The kernel's resident memory now and at its peak (KiB, VmRSS and VmHWM), from /proc."""
    with open("/proc/%d/status" % pid) as status:
        fields = dict(line.split(":", 1) for line in status)
    return {name: int(fields[name].split()[0]) for name in ("VmRSS", "VmHWM")}


def busy_flood() -> dict:
    """While a cell waits (for input()), connections without the key send 15 MiB frames on
    shell, control and stdin, each as soon as the kernel has taken the one before (a send
    buffer of one message, and a time limit: a kernel that stopped reading would let it run
    out); each connection's last message is a signed kernel_info_request. The kernel's peak
    memory, read from /proc, is judged by test_kernel.py."""
    import zmq
    from jupyter_client.session import Session

    with running(["--timeout", "20"]) as (km, kc):
        pid = km.provisioner.process.pid
        execute(kc, "x = 1")
        good = Session(key=km.session.key)  # a session of its own: msg_ids of its own
        seen = {"before": memory(pid)}
        msg_id = kc.execute("input('go on? ')\n'cell done'", allow_stdin=True)
        stdin_request(kc, msg_id)
        context = zmq.Context.instance()
        frame = zmq.Frame(b"x" * (15 << 20))
        ports = [km.shell_port] * 2 + [km.control_port, km.stdin_port]
        sockets = []
        for port in ports:
            sock = context.socket(zmq.DEALER)
            sock.linger = 0
            sock.sndhwm = 1
            sock.sndtimeo = ANSWER * 1000
            sock.connect("tcp://%s:%d" % (km.ip, port))
            sockets.append(sock)
        began = time.monotonic()
        for _ in range(8):  # a connection's queue in the kernel (rcvhwm) holds 8
            for sock in sockets:
                sock.send_multipart([b"<IDS|MSG>", b"", b"{}", b"{}", b"{}", frame],
                                    copy=False)
        finals = {}
        for sock, port in zip(sockets, ports):
            if port != km.stdin_port:
                final = good.msg("kernel_info_request", content={})
                sock.send_multipart(good.serialize(final))
                finals[sock] = final["header"]["msg_id"]
        seen["flood_seconds"] = time.monotonic() - began
        kc.input("yes")
        seen["cell"] = answered(kc, msg_id)
        for sock, final in finals.items():
            while True:
                if not sock.poll(ANSWER * 1000):
                    raise AssertionError("no reply to a held kernel_info_request")
                _, reply = good.feed_identities(sock.recv_multipart())
                if good.deserialize(reply)["parent_header"].get("msg_id") == final:
                    break
        seen["peak"] = memory(pid)
        seen["after"] = execute(kc, "x + 41")
        for sock in sockets:
            sock.close()
        return seen


def input_flood() -> dict:
    """A cell (allow_stdin) that writes input requests of its own on the driver's channel, each
    with a prompt over the bound, 72 MiB in all (more than the channel's budget), reading none of
    the refusals."""
    code = ("import gc\n"
            "asks = [o for o in gc.get_objects() if type(o).__name__ == '_Input'][0]\n"
            "prompt = 'x' * (64 * 1024 + 1)\n"
            "for n in range(1100):\n"
            "    asks.channel.send({'kind': 'input', 'token': asks.token, 'n': n,\n"
            "                       'prompt': prompt})\n"
            "'flooded'")
    with running(["--timeout", "5"]) as (km, kc):
        seen = {"cell": execute(kc, code)}
        seen["after"] = execute(kc, "41 + 1")
        return seen


def waits_for_another_user(ip: str = "127.0.0.1") -> dict:
    """A kernel listening on `ip` that waits while another user's client connects to it
    (test_kernel.py runs that one): its pid and ports on a line of their own, then a cell once a
    line comes in."""
    with running(ip=ip) as (km, kc):
        seen = {"first": execute(kc, "6 * 7")}
        print(json.dumps({"pid": km.provisioner.process.pid, "ip": km.ip,
                          "ports": {"shell": km.shell_port, "iopub": km.iopub_port}}),
              flush=True)
        sys.stdin.readline()
        seen["after"] = execute(kc, "6 * 7")
        return seen


def notebook(path: str, *kernel_args: str) -> dict:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, kernel_name="pysandbox-test", allow_errors=True, timeout=ANSWER,
                   extra_arguments=list(kernel_args)).execute()
    return {"cells": [cell.get("outputs", []) for cell in nb.cells]}


if __name__ == "__main__":
    scenario = sys.argv[1]
    args = sys.argv[2:]
    result = {"basics": basics, "interrupt": interrupt, "timeout": timeout,
              "host_write": host_write, "hostile": hostile,
              "notebook": notebook, "rich": rich, "ipython": ipython, "complete": complete,
              "stop_on_error": stop_on_error, "flood": flood, "load": load, "stdin": stdin,
              "busy_flood": busy_flood, "input_flood": input_flood,
              "waits_for_another_user": waits_for_another_user}[scenario](*args)
    print(json.dumps(result))
