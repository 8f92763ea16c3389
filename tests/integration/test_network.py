"""Network mode "proxy": egress only to the allowlist, through pysandbox's proxy.

The test starts its own servers on 127.0.0.x (all of 127/8 is loopback on Linux, so 127.0.0.2
and 127.0.0.3 are distinct "hosts") and judges from their logs of accepted connections and
requests, not from what the script prints. Name resolution happens in the proxy, on the host:
names in these tests are ones the host resolves (localhost) or that it cannot (then the proxy
answers 502, which proves the allowlist let the request through; 403 would mean it did not).
Matching of real wildcard subdomains is covered by tests/unit/proxy_test.cpp.
"""

import http.server
import json
import socket
import threading
import unittest

from harness import SandboxTestCase, leftovers, parse_report, profile, run

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
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
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
        obj = json.loads(result.stdout)
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
        body = """
        import socket
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", 3128))
            report("bound")
        except OSError as e:
            report(e.errno)
        """
        result = self.run_script(body, options=["--net", "proxy"])
        self.assertExit(result, 0)
        self.assertEqual(parse_report(result.stdout), 98)  # EADDRINUSE

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

    def test_the_network_profile_runs_in_proxy_mode_and_can_verify_https(self):
        code = ("import os, ssl; print(os.environ['HTTPS_PROXY']); "
                "print(len(ssl.create_default_context().get_ca_certs()) > 0)")
        result = run(["run", "-p", "network", "-c", code])
        self.assertExit(result, 0)
        self.assertEqual(result.stdout, b"http://127.0.0.1:3128\nTrue\n")


if __name__ == "__main__":
    unittest.main()
