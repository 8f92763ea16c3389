#!/usr/bin/python3
"""Hostile packages through `pysandbox env`: package code that runs while pip installs it, and
package code that runs whenever a script imports from the environment.

1. An sdist (built only because --allow-build asks for it) whose setup.py writes a host file,
   connects to a listener on the host's loopback directly and through the install's proxy, and
   writes into the package store. The install's index is a PEP 503 index on 127.0.0.1 (the one
   destination allowed); the listener is another port there.
2. A wheel with a .pth file and a module, installed from a wheelhouse; a script run --with-env
   that environment imports it and tries to rewrite the environment's files, add one, and write
   a host file. The .pth carries the same writes as code that runs at import. pysandbox puts the
   environment on PYTHONPATH, not among the site directories, so Python does not run it by
   itself; the script runs it as any code in the sandbox may (site.addsitedir), and the .pth
   says that it ran (the control) and what each write got.

Contained when, judged from the host: the host files never appear, the listener saw no
connection, the store holds nothing the packages wrote, and `env show --verify` still finds
every file of each environment as its ID says. Control: the installs succeed and the script sees
the package (so the containment is not a failed install).
"""
import functools
import http.server
import io
import os
import socket
import sys
import tarfile
import threading
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A  # noqa: E402
from support.running import run  # noqa: E402
from support.wheels import make_wheel, simple_index  # noqa: E402

RUN_ONLY = "pysandbox env is a command of its own; the run side is exercised by --with-env here"

SETUP_PY = r'''
import os, socket, urllib.request
from setuptools import setup
for path in {targets!r}:
    try:
        with open(path, "w") as f:
            f.write("pwned")
    except OSError:
        pass
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
except OSError:
    pass
try:
    urllib.request.urlopen("http://127.0.0.1:{port}/through-the-proxy", timeout=5)
except Exception:
    pass
setup(name="evilsdist", version="1.0", py_modules=["evilsdist"])
'''

# One line: site runs the lines of a .pth that begin with "import".
PTH_CODE = ("import os; "
            "exec(\"print('pth ran')\\nfor p in {targets!r}:\\n try:\\n"
            "  open(p, 'w').write('pwned')\\n  print('pth wrote', p)\\n"
            " except OSError as e:\\n  print('pth refused', p, e.errno)\")\n")


def sdist(directory: Path, targets, port) -> None:
    files = {
        "evilsdist-1.0/setup.py": SETUP_PY.format(targets=targets, port=port),
        "evilsdist-1.0/evilsdist.py": "VALUE = 1\n",
        "evilsdist-1.0/PKG-INFO": "Metadata-Version: 2.1\nName: evilsdist\nVersion: 1.0\n",
    }
    with tarfile.open(directory / "evilsdist-1.0.tar.gz", "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    os.chmod(directory / "evilsdist-1.0.tar.gz", 0o644)


def index_for(house: Path, root: Path):
    simple_index(house, root)
    page = root / "simple" / "evilsdist"
    page.mkdir(exist_ok=True)
    (page / "evilsdist-1.0.tar.gz").write_bytes((house / "evilsdist-1.0.tar.gz").read_bytes())
    (page / "index.html").write_text('<a href="evilsdist-1.0.tar.gz">evilsdist-1.0.tar.gz</a>\n')

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    A.at_cleanup(server.shutdown)
    return f"http://127.0.0.1:{server.server_address[1]}/simple"


class Listener:
    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()


def caller_uid():
    return A.NOBODY if A.RUN_AS == "nobody" else 0


def test():
    judge = A.Judge("package code at install and at import writes the host and the store, "
                    "connects out")
    store = A.shared_dir(owner=caller_uid())
    house = A.shared_dir()
    outside = A.shared_dir(mode=0o777)
    listener = Listener()
    targets = [str(outside / "pwned-host"), str(store / "pwned-store"),
               str(store / "envs" / "pwned-envs")]
    sdist(house, targets, listener.port)
    pth_targets = targets + ["/sandbox/.packages/evil_wheel.py",
                             "/sandbox/.packages/added.py"]
    make_wheel(house, "evil_wheel", "1.0", {
        "evil_wheel.py": "VALUE = 7\n",
        "evil_wheel-hook.pth": PTH_CODE.format(targets=pth_targets),
    })
    index = index_for(house, A.shared_dir())

    def env(*args):
        return run(["env", args[0], "--cache-dir", str(store), *args[1:]], timeout=180)

    built = env("create", "--allow-build", "--index-url", index, "evilsdist")
    if built.returncode != 0:
        judge.misbehaved("the sdist did not install with --allow-build, so its build proved "
                         "nothing" + built.describe())
    wheel = env("create", "--find-links", str(house), "evil_wheel")
    if wheel.returncode != 0:
        judge.misbehaved("the wheel did not install" + wheel.describe())
    wheel_id = wheel.stdout.decode().strip()
    script = A.shared_dir() / "use.py"
    A.write_file(script, "import site\nsite.addsitedir('/sandbox/.packages')\n"
                 "import evil_wheel\nprint('value', evil_wheel.VALUE)\n"
                 "for p in " + repr(pth_targets) + ":\n"
                 "    try:\n        open(p, 'w').write('pwned')\n    except OSError:\n"
                 "        pass\n")
    used = run(["run", "--with-env", wheel_id, "--cache-dir", str(store), str(script)])
    if b"value 7" not in used.stdout or b"pth ran" not in used.stdout:
        judge.misbehaved("the script did not import the environment's package, or its .pth did "
                         "not run" + used.describe())
    for name in ("evil_wheel.py", "added.py"):
        # EROFS, the read-only mount; for root's store the files are root's, so EACCES may
        # come first. Anything else (a write that worked) is judged below from the host.
        refused = [f"pth refused /sandbox/.packages/{name} {errno}".encode() for errno in (30, 13)]
        if not any(line in used.stdout for line in refused):
            judge.misbehaved(f"the .pth's write of {name} was not refused with EROFS or EACCES"
                             + used.describe())

    for path in targets:
        if os.path.exists(path):
            judge.escape(f"{path} was written on the host")
    if listener.connections:
        judge.escape(f"the host listener on 127.0.0.1:{listener.port} got "
                     f"{listener.connections} connection(s) from package code")
    for env_id in os.listdir(store / "envs"):
        verified = env("show", env_id, "--verify")
        if verified.returncode != 0:
            judge.escape(f"environment {env_id[:12]} no longer verifies" + verified.describe())
        for name in ("added.py",):
            if (store / "envs" / env_id / "site" / name).exists():
                judge.escape(f"{name} appeared in environment {env_id[:12]}")
    judge.done(built.describe() + wheel.describe() + used.describe())


if __name__ == "__main__":
    A.main(test)
