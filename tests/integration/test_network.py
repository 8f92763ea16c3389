"""Network mode "proxy": egress only to the allowlist, through pysandbox's proxy.

The test starts its own servers on 127.0.0.x (all of 127/8 is loopback on Linux, so 127.0.0.2
and 127.0.0.3 are distinct "hosts") and judges from their logs of accepted connections and
requests, not from what the script prints. Name resolution happens in the proxy, on the host:
names in these tests are ones the host resolves (localhost) or that it cannot (then the proxy
answers 502, which proves the allowlist let the request through; 403 would mean it did not).
Matching of real wildcard subdomains is covered by tests/unit/proxy/proxy_test.cpp.

HTTPS is verified against certificates made for the run with the openssl command: a TLS server
on 127.0.0.1 whose certificate a test CA signed (the script trusts that CA, given with --input)
and one signed by a CA the script does not know; the servers log completed and refused
handshakes.
"""

import errno
import http.server
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
import unittest
from pathlib import Path

from harness import (SANDBOX_PYTHON, SandboxTestCase, landlock_abi, leftovers, parse_report,
                     profile, run, temp_dir)

SLACK = 1.0  # seconds after the wall-clock limit that pysandbox may take to end a proxied run


class Server:
    """An HTTP server on HOST:random port that logs every connection it accepts.

    ``hang=True``: accept and never answer (a hung upstream).
    """

    def __init__(self, host: str, hang: bool = False):
        self.host = host
        self.connections: list[tuple[str, int]] = []
        self.requests: list[str] = []
        self._held: list[socket.socket] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.requests.append(self.path)
                body = f"hello from {server.host} {self.path}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        class Logging(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def verify_request(self, request, client_address):
                server.connections.append(client_address)
                if hang:
                    server._held.append(request)
                    return False  # never answered; the socket stays open in _held
                return True

            def shutdown_request(self, request):
                if request not in server._held:
                    super().shutdown_request(request)

        self.httpd = Logging((host, 0), Handler)
        self.port = self.httpd.server_address[1]
        # shutdown() waits for the loop to look at its flag, which it does every poll_interval:
        # at the default 0.5 s, half a second per server closed, most of this file's time.
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,),
                                       daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        for s in self._held:
            s.close()


# urllib with the environment's proxies: plain http:// goes to HTTP_PROXY as an absolute URI.
FETCH = """
import os, sys, urllib.error, urllib.request
url = sys.argv[2]
out = {"env": {k: os.environ.get(k) for k in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")}}
try:
    with urllib.request.urlopen(url, timeout=60) as response:
        out.update(status=response.status, body=response.read().decode())
except urllib.error.HTTPError as e:
    out.update(status=e.code, body=e.read().decode())
report(out)
"""

# http.client through a CONNECT tunnel (what HTTPS_PROXY does, without needing TLS here).
TUNNEL = """
import http.client, sys
host, port = sys.argv[2].rsplit(":", 1)
conn = http.client.HTTPConnection("127.0.0.1", 3128, timeout=30)
conn.set_tunnel(host, int(port))
try:
    conn.request("GET", sys.argv[3])
    response = conn.getresponse()
    report({"status": response.status, "body": response.read().decode()})
except OSError as e:
    report({"error": str(e)})
"""


class ProxyTest(SandboxTestCase):
    def setUp(self):
        super().setUp()
        self.allowed = self.server("127.0.0.2")
        self.denied = self.server("127.0.0.3")

    def server(self, host: str, hang: bool = False) -> Server:
        server = Server(host, hang=hang)
        self.addCleanup(server.close)
        return server

    def fetch(self, url: str, *allow: str, options=()):
        flags = [f"--allow={a}" for a in allow]
        result = self.run_script(FETCH, url, options=["--timeout", "20s", *flags, *options])
        return result, parse_report(result.stdout)

    def test_an_allowed_host_answers_plain_http(self):
        path = f"/plain-{self.marker}"
        result, report = self.fetch(f"http://{self.allowed.address}{path}", self.allowed.address)
        self.assertExit(result, 0)
        self.assertEqual(self.allowed.requests, [path], "the server never saw the request")
        self.assertEqual((report["status"], report["body"]),
                         (200, f"hello from 127.0.0.2 {path}"))
        proxy = "http://127.0.0.1:3128"
        self.assertEqual(report["env"], {"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "NO_PROXY": ""})
        self.assertEqual(result.stderr, b"", "an allowed run reports nothing")

    def test_an_allowed_host_answers_through_connect(self):
        path = f"/tunnel-{self.marker}"
        result = self.run_script(TUNNEL, self.allowed.address, path,
                                 options=["--net", "proxy", "--allow", self.allowed.address])
        self.assertExit(result, 0)
        self.assertEqual(parse_report(result.stdout),
                         {"status": 200, "body": f"hello from 127.0.0.2 {path}"})
        self.assertEqual(self.allowed.requests, [path])

    def test_a_denied_host_gets_403_with_the_policy_and_the_run_reports_it(self):
        result, report = self.fetch(f"http://{self.denied.address}/x", self.allowed.address)
        self.assertExit(result, 0)
        self.assertEqual(self.denied.connections, [], "the denied server was reached")
        self.assertEqual(report["status"], 403)
        self.assertIn("sandbox policy blocked the connection to " + self.denied.address,
                      report["body"])
        self.assertIn("Allowed destinations: " + self.allowed.address, report["body"])
        self.assertIn(f"pysandbox: the sandbox policy blocked 1 network connection: "
                      f"{self.denied.address}", result.stderr.decode())

    def test_a_denied_host_is_a_network_violation_in_the_json_result(self):
        result = self.run_script(FETCH, f"http://{self.denied.address}/x",
                                 options=["--json", "--allow", self.allowed.address])
        obj = result.json()
        self.assertEqual(self.denied.connections, [])
        self.assertEqual(obj["status"], "ok")
        self.assertEqual(obj["violations"], [{"kind": "network", "what": self.denied.address,
                                              "count": 1, "action": "denied"}])
        self.assertEqual(obj["limits"]["network"], "proxy")
        self.assertEqual(parse_report(obj["stdout"].encode())["status"], 403)

    def test_connect_to_an_allowed_host_on_another_port_is_denied(self):
        other_port = self.server("127.0.0.2")
        result = self.run_script(TUNNEL, other_port.address, "/",
                                 options=["--allow", self.allowed.address])
        self.assertExit(result, 0)
        self.assertIn("403", parse_report(result.stdout).get("error", ""), result.describe())
        self.assertEqual(other_port.connections, [])
        self.assertIn(f"blocked 1 network connection: {other_port.address}",
                      result.stderr.decode())

    def test_a_direct_connection_bypassing_the_proxy_reaches_nothing(self):
        body = """
        import socket, sys
        errors = {}
        for target in sys.argv[2:]:
            host, port = target.rsplit(":", 1)
            try:
                socket.create_connection((host, int(port)), timeout=2).close()
                errors[target] = None
            except OSError as e:
                errors[target] = str(e)
        report(errors)
        """
        result = self.run_script(body, self.allowed.address, f"127.0.0.1:{self.allowed.port}",
                                 options=["--allow", self.allowed.address])
        self.assertExit(result, 0)
        self.assertEqual(self.allowed.connections, [], "a direct connection reached the host")
        self.assertNotIn(None, parse_report(result.stdout).values())

    def test_the_script_cannot_take_over_the_proxy_port(self):
        # The script tries to bind the proxy's address (127.0.0.1:3128) every way a listener
        # could share or steal connections to it (the address itself, the wildcard, the dual-stack
        # IPv6 wildcard; with SO_REUSEADDR/SO_REUSEPORT), keeps whatever it got listening, then fetches an allowed URL through the proxy a
        # few times. The proof is the host's server: it saw every request, so the proxy (not a
        # socket of the script's, which would leave the connections unanswered or answer them
        # itself) still served the port after the attack.
        body = """
        import os, socket, sys, urllib.request
        held, errors = [], {}
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "0.0.0.0"),
                             (socket.AF_INET6, "::")):
            for opts in ((), (socket.SO_REUSEADDR,), (socket.SO_REUSEPORT,),
                         (socket.SO_REUSEADDR, socket.SO_REUSEPORT)):
                s = socket.socket(family)
                for opt in opts:
                    s.setsockopt(socket.SOL_SOCKET, opt, 1)
                key = "%s %s" % (host, "+".join(map(str, opts)) or "-")
                try:
                    s.bind((host, 3128))
                    s.listen(16)
                    held.append(s)
                    errors[key] = None
                except OSError as e:
                    errors[key] = e.errno
        statuses = []
        for path in sys.argv[3:]:
            try:
                with urllib.request.urlopen("http://%s%s" % (sys.argv[2], path), timeout=5) as r:
                    statuses.append([r.status, r.read().decode()])
            except OSError as e:
                statuses.append([None, str(e)])
        report({"bind": errors, "fetch": statuses})
        """
        paths = [f"/after-takeover-{i}-{self.marker}" for i in range(3)]
        result = self.run_script(body, self.allowed.address, *paths,
                                 options=["--net", "proxy", "--allow", self.allowed.address,
                                          "--timeout", "20s"])
        self.assertExit(result, 0)
        self.assertEqual(self.allowed.requests, paths,
                         "the allowed server did not see every request made through the proxy "
                         "after the attack" + result.describe())
        report = parse_report(result.stdout)
        self.assertEqual(report["fetch"],
                         [[200, f"hello from 127.0.0.2 {path}"] for path in paths])
        # The script's own account, secondary: every bind was refused: by Landlock (EACCES)
        # where the kernel handles TCP binds (ABI 4), else by the port in use (EADDRINUSE).
        refused = errno.EACCES if landlock_abi() >= 4 else errno.EADDRINUSE
        self.assertEqual(set(report["bind"].values()), {refused}, report["bind"])

    def test_a_wildcard_takes_subdomains_only(self):
        localhost = self.server("127.0.0.1")
        rule = f"*.localhost:{localhost.port}"
        # The bare domain and a lookalike are refused by the policy, before any lookup.
        for host in ("localhost", "evillocalhost"):
            result, report = self.fetch(f"http://{host}:{localhost.port}/", rule)
            self.assertEqual(report["status"], 403, result.describe())
            self.assertIn(f"blocked 1 network connection: {host}:{localhost.port}",
                          result.stderr.decode())
        # A subdomain passes the policy; the host cannot resolve it, so the proxy says 502.
        result, report = self.fetch(f"http://api.localhost:{localhost.port}/", rule)
        self.assertEqual(report["status"], 502, result.describe())
        self.assertNotIn(b"blocked", result.stderr)
        self.assertEqual(localhost.connections, [])

    def test_an_allowed_name_is_resolved_by_the_proxy(self):
        localhost = self.server("127.0.0.1")
        path = f"/by-name-{self.marker}"
        result, report = self.fetch(f"http://localhost:{localhost.port}{path}",
                                    f"localhost:{localhost.port}")
        self.assertEqual(report["status"], 200, result.describe())
        self.assertEqual(localhost.requests, [path])
        # By name, not by address: the same server by its address is not allowed.
        result, report = self.fetch(f"http://127.0.0.1:{localhost.port}/", f"localhost:{localhost.port}")
        self.assertEqual(report["status"], 403, result.describe())

    def test_a_hung_upstream_does_not_outlast_the_wall_clock_limit(self):
        hung = self.server("127.0.0.4", hang=True)
        result = self.run_script(FETCH, f"http://{hung.address}/", timeout=15,
                                 options=["--timeout", "2s", "--allow", hung.address])
        self.assertExit(result, 124)
        self.assertEqual(len(hung.connections), 1, "the proxy never reached the hung server")
        self.assertGreaterEqual(result.elapsed, 2.0)
        self.assertLess(result.elapsed, 2.0 + SLACK, result.describe())
        self.assertEqual(leftovers(self.marker), [])


def openssl(*args: str, cwd: Path) -> None:
    """Run the openssl CLI (Debian package openssl); fail the test if it is missing or fails."""
    binary = shutil.which("openssl")
    if binary is None:
        raise AssertionError("the openssl command is needed to make the test certificates "
                             "(apt-get install openssl)")
    proc = subprocess.run([binary, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise AssertionError(f"openssl {' '.join(args)} failed: {proc.stderr}")


def make_ca(directory: Path, name: str) -> None:
    """NAME.pem (certificate) and NAME.key: a self-signed CA made for this test run."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
            "-subj", f"/CN=pysandbox test {name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)


def make_server_cert(directory: Path, name: str, ca: str, ip: str) -> None:
    """NAME.pem and NAME.key: a server certificate for IP, signed by CA (see make_ca)."""
    (directory / f"{name}.ext").write_text(
        f"subjectAltName=IP:{ip}\nbasicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n")
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={ip}",
            cwd=directory)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
            cwd=directory)


class TlsServer:
    """A TLS server on 127.0.0.1:random port with the given certificate. It logs each accepted
    connection's outcome: ("request", path) once the handshake completed and a request line
    came, or ("handshake failed", the reason) -- e.g. the client's alert "unknown ca"."""

    def __init__(self, cert: Path, key: Path):
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.log: list[tuple[str, str]] = []
        self.logged = threading.Condition()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        try:
            with self.context.wrap_socket(conn, server_side=True) as tls:
                line = tls.makefile("rb").readline().decode(errors="replace").split()
                path = line[1] if len(line) > 1 else ""
                body = f"hello over TLS {path}".encode()
                tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n"
                            b"\r\n%s" % (len(body), body))
                entry = ("request", path)
        except (OSError, ssl.SSLError) as e:
            entry = ("handshake failed", str(e))
        with self.logged:
            self.log.append(entry)
            self.logged.notify_all()

    def wait_for(self, count: int, timeout: float = 10) -> list[tuple[str, str]]:
        """The log once it has ``count`` entries (or whatever it has after ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self.logged:
            while len(self.log) < count and (left := deadline - time.monotonic()) > 0:
                self.logged.wait(left)
            return list(self.log)

    def close(self) -> None:
        self.listener.close()


# HTTPS through the proxy's CONNECT tunnel, trusting only the CA file given (--input ca.pem).
HTTPS = """
import http.client, ssl, sys
context = ssl.create_default_context(cafile="ca.pem")
outcome = {}
for target, path in zip(sys.argv[2::2], sys.argv[3::2]):
    host, port = target.rsplit(":", 1)
    conn = http.client.HTTPSConnection("127.0.0.1", 3128, timeout=20, context=context)
    conn.set_tunnel(host, int(port))
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        outcome[target] = {"status": response.status, "body": response.read().decode()}
    except ssl.SSLCertVerificationError as e:
        outcome[target] = {"verify_error": e.verify_code, "message": e.verify_message}
    except OSError as e:
        outcome[target] = {"error": repr(e)}
    finally:
        conn.close()
report(outcome)
"""


class HttpsTest(SandboxTestCase):
    """Certificates made for the run: a test CA and a server certificate it signed, and a
    rogue CA (not given to the script) with a server certificate of its own."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.keys = temp_dir(0o700)  # private keys stay root's
        make_ca(cls.keys, "ca")
        make_ca(cls.keys, "rogue-ca")
        make_server_cert(cls.keys, "server", "ca", "127.0.0.1")
        make_server_cert(cls.keys, "rogue-server", "rogue-ca", "127.0.0.1")
        cls.public = temp_dir()
        cls.ca = cls.public / "ca.pem"
        shutil.copy(cls.keys / "ca.pem", cls.ca)
        os.chmod(cls.ca, 0o644)

    def tls_server(self, name: str) -> TlsServer:
        server = TlsServer(self.keys / f"{name}.pem", self.keys / f"{name}.key")
        self.addCleanup(server.close)
        return server

    def test_the_network_profile_runs_in_proxy_mode_and_can_verify_https(self):
        good = self.tls_server("server")
        rogue = self.tls_server("rogue-server")
        good_path, rogue_path = f"/verified-{self.marker}", f"/rogue-{self.marker}"
        result = self.run_script(
            HTTPS + "import os\nreport({'proxy': os.environ['HTTPS_PROXY'], 'system_cas': "
                    "len(ssl.create_default_context().get_ca_certs())})\n",
            good.address, good_path, rogue.address, rogue_path,
            options=["-p", "network", "--input", str(self.ca), "--allow", good.address,
                     "--allow", rogue.address])
        self.assertExit(result, 0)
        # The certificate the test CA signed verified: the handshake completed and the request
        # reached the host's server, which logged it.
        self.assertEqual(good.wait_for(1), [("request", good_path)], result.describe())
        # The rogue certificate did not: the proxy let the tunnel through (the rogue server
        # accepted a connection), and the client broke the handshake off, refusing the chain.
        rogue_log = rogue.wait_for(1)
        self.assertEqual(len(rogue_log), 1, result.describe())
        self.assertEqual(rogue_log[0][0], "handshake failed", rogue_log)
        self.assertIn("unknown ca", rogue_log[0][1].lower(), rogue_log)
        lines = [line for line in result.stdout.splitlines() if line.startswith(b"REPORT ")]
        outcome = parse_report(lines[0])
        self.assertEqual(outcome[good.address],
                         {"status": 200, "body": f"hello over TLS {good_path}"})
        self.assertEqual(outcome[rogue.address]["verify_error"], 20,  # unable to get issuer
                         outcome[rogue.address])
        # The system's CA store is the host's, so real destinations verify too.
        env = parse_report(lines[1])
        self.assertEqual(env["proxy"], "http://127.0.0.1:3128")
        host_cas = subprocess.run(
            [SANDBOX_PYTHON, "-c", "import ssl; print(len(ssl.create_default_context()"
             ".get_ca_certs()))"], capture_output=True, text=True, check=True).stdout
        self.assertGreater(int(host_cas), 0, "the host has no CA certificates (ca-certificates)")
        self.assertEqual(env["system_cas"], int(host_cas))


class AllowlistErrorTest(SandboxTestCase):
    def test_a_bad_allow_flag_is_a_usage_error_naming_the_flag(self):
        result = run(["run", "--allow", "example.org", "-c", "pass"])
        self.assertExit(result, 125)
        self.assertIn(b'--allow: "example.org": expected HOST:PORT', result.stderr)

    def test_allow_with_another_network_mode_is_refused(self):
        result = run(["run", "--net", "none", "--allow", "example.org:80", "-c", "pass"])
        self.assertExit(result, 125)
        self.assertIn(b"--allow: needs --net proxy", result.stderr)

    def test_a_bad_profile_entry_names_file_line_column_and_key(self):
        path = profile('[network]\nmode = "proxy"\nallow = ["a.org:443", "*.b.org"]\n')
        result = run(["run", "-p", str(path), "-c", "pass"])
        self.assertExit(result, 125)
        self.assertIn(f'{path}:3:23: network.allow[1]: "*.b.org": expected HOST:PORT'.encode(),
                      result.stderr)


if __name__ == "__main__":
    unittest.main()
