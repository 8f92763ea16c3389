#!/usr/bin/python3
"""Use the allowlist proxy (--net proxy) to reach host services the allowlist does not name.

The host listens on TCP 127.0.0.1, ::1 (when the host has IPv6) and 0.0.0.0. The run allows
only one unrelated destination. The script asks the proxy for the listeners every way a parser
might get wrong: CONNECT and absolute-URI requests to 127.0.0.1, localhost, localhost., [::1],
0.0.0.0, 127.1, 2130706433, 0x7f000001, 127.0.0.1 with user info, a mixed-case scheme, header
smuggling in the Host header, and a pipelined second request after a denied one; and it
connects directly, bypassing the proxy. Contained when no listener ever had a connection queued.

No connection is only proof if the proxy was still answering: a proxy that died at the first odd
request would refuse everything after it. So the run also allows one destination the host
serves, an HTTP server on 127.0.0.2, and the script asks for it through the proxy at the start
and again after every attack (absolute URI and CONNECT): the host's server must have logged both
late requests, and the early one as well (else the allowlist never worked and nothing was
tested).
"""
import http.server
import os
import select
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

NO_GVISOR = (  # no gvisor variant (attack.py, PYSANDBOX_VIA)
    "an attack on the --net proxy, which `run --kernel gvisor` refuses (exit 125): gVisor's "
    "network is none or loopback"
)

SCRIPT = r'''
import socket
port, port6, port_any = ARGS[0].split(",")
alive = ARGS[1]   # the allowed host server, HOST:PORT

def ask(raw):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=3)
    s.sendall(raw.encode())
    data = b""
    try:
        while chunk := s.recv(4096):
            data += chunk
    except OSError:
        pass
    s.close()
    return data.split(b"\r\n", 1)[0].decode(errors="replace")

def still_served(tag):
    attempt("alive GET " + tag, ask, "GET http://%s/%s-get-%s HTTP/1.1\r\nHost: %s\r\n"
            "Connection: close\r\n\r\n" % (alive, tag, MARKER, alive))
    def tunnel():
        s = socket.create_connection(("127.0.0.1", 3128), timeout=3)
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (alive, alive)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
        s.sendall(("GET /%s-connect-%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                   % (tag, MARKER, alive)).encode())
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        s.close()
        return head.split(b"\r\n", 1)[0].decode() + " / " + data.split(b"\r\n", 1)[0].decode()
    attempt("alive CONNECT " + tag, tunnel)

still_served("before")
hosts = ["127.0.0.1", "localhost", "localhost.", "0.0.0.0", "127.1", "2130706433",
         "0x7f000001", "LOCALHOST", "127.0.0.1.nip.io"]
requests = []
for p in (port, port_any):
    for h in hosts:
        requests.append("CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n\r\n" % (h, p, h, p))
        requests.append("GET http://%s:%s/ HTTP/1.1\r\nHost: x\r\n\r\n" % (h, p))
    requests.append("GET HTTP://user@127.0.0.1:%s/ HTTP/1.1\r\n\r\n" % p)
    requests.append("GET http://127.0.0.1:%s@allowed.invalid:1/ HTTP/1.1\r\n\r\n" % p)
    requests.append("GET /x HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n" % p)
    requests.append("CONNECT 127.0.0.1:%s HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n" % p)
if port6 != "0":
    requests.append("CONNECT [::1]:%s HTTP/1.1\r\n\r\n" % port6)
    requests.append("GET http://[::1]:%s/ HTTP/1.1\r\n\r\n" % port6)
    requests.append("CONNECT [::ffff:127.0.0.1]:%s HTTP/1.1\r\n\r\n" % port_any)
for raw in requests:
    attempt("proxy " + raw.split("\r\n", 1)[0], ask, raw)
for host, p in (("127.0.0.1", port), ("127.0.0.1", port_any), ("::1", port6)):
    if p != "0":
        attempt("direct %s %s" % (host, p),
                lambda: socket.create_connection((host, int(p)), timeout=1).close())
still_served("after")
note("done", 0)
'''


class AliveServer:
    """The one destination the run allows: an HTTP server on 127.0.0.2 that logs the paths."""

    def __init__(self):
        self.paths: list[str] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Handler)
        self.httpd.daemon_threads = True
        self.address = f"127.0.0.2:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        A.at_cleanup(self.httpd.shutdown)


def test():
    judge = A.Judge("host loopback through the allowlist proxy")
    alive = AliveServer()
    listeners = []

    def listen(fam, addr):
        try:
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.bind((addr, 0))
        except OSError:
            return 0
        s.listen(64)
        s.setblocking(False)
        listeners.append((addr, s))
        return s.getsockname()[1]

    ports = [listen(socket.AF_INET, "127.0.0.1"), listen(socket.AF_INET6, "::1"),
             listen(socket.AF_INET, "0.0.0.0")]
    with A.Sandbox(SCRIPT, [",".join(map(str, ports)), alive.address], timeout="20s",
                   options=["--allow", "allowed.invalid:1", "--allow", alive.address]) as sb:
        pass
    o = A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    expected = [f"/{tag}-{how}-{sb.marker}" for tag in ("before", "after")
                for how in ("get", "connect")]
    if alive.paths[:2] != expected[:2]:
        judge.misbehaved(f"the allowed host server never got the requests made through the proxy "
                         f"before the attack ({alive.paths}): the proxy did not serve, nothing "
                         f"was tested")
    elif alive.paths != expected:
        judge.misbehaved(f"after the attack the proxy no longer served the allowed destination "
                         f"(the host's server logged {alive.paths}), so the silent listeners "
                         f"prove nothing")
    for addr, s in listeners:
        while select.select([s], [], [], 0.2)[0]:
            conn, peer = s.accept()
            judge.escape(f"host listener {addr} accepted a connection from {peer}")
            conn.close()
    judge.done(o.describe())


if __name__ == "__main__":
    A.main(test)
