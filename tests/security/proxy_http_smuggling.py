#!/usr/bin/python3
"""Smuggle requests and headers past the proxy's plain-HTTP path.

For a plain http:// request the proxy checks the absolute URI against the allowlist and sends
the rest of what the script wrote upstream. What the upstream server then believes is up to
bytes the proxy never judged: a Host header naming another site (virtual hosts route on it), a
header line ended by a bare LF (which the proxy reads as part of one header and a lenient
server as two, the second a Host or a request line), and a second request pipelined behind
the first, in the same write or after the first one's body, which reaches the server without
the allowlist ever seeing it. The upstream is a test server on 127.0.0.1 (allowlisted as
127.0.0.1:PORT) that logs every byte of every connection and reads it as leniently as such
servers do (any LF ends a line).

Contained when, in what the server received (read leniently: CRLF, LF and CR each end a
line): each connection carries exactly one request, whose target is origin-form or names
127.0.0.1:PORT, and whose only Host header is 127.0.0.1:PORT (so "evil.example", which the
script puts only in Host headers and in pipelined requests, never arrives as either); every
head line ends in CRLF; the requests with a bare LF in their head were answered 400 and never
reached the server; no pipelined second request reached it (the first one may be refused with
it, or relayed once). Controls: a request without Host, one with the right Host and a POST
with a body each reach the server once (the relay works).
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

NO_GVISOR = (  # no gvisor variant (attack.py, PYSANDBOX_VIA)
    "an attack on the --net proxy, which `run --kernel gvisor` refuses (exit 125): gVisor's "
    "network is none or loopback"
)

SCRIPT = A.PROXY_CLIENT + r'''
import json
P = int(ARGS[0])
A = "127.0.0.1:%d" % P
U = "http://" + A
cases = {
    # The Host header the script chooses.
    "host": "GET %s/case-host HTTP/1.1\r\nHost: evil.example\r\n\r\n" % U,
    "hostdup": "GET %s/case-hostdup HTTP/1.1\r\nHost: %s\r\nHost: evil.example\r\n\r\n" % (U, A),
    "hostcase": "GET %s/case-hostcase HTTP/1.1\r\nhost:evil.example\r\n\r\n" % U,
    "hostport": "GET %s/case-hostport HTTP/1.1\r\nHost: evil.example:%d\r\n\r\n" % (U, P),
    # Header lines that do not end in CRLF.
    "lfvalue": "GET %s/case-lfvalue HTTP/1.1\r\nX-A: 1\nHost: evil.example\r\n\r\n" % U,
    "lfterm": "GET %s/case-lfterm HTTP/1.1\r\nHost: %s\nX-B: 2\r\n\r\n" % (U, A),
    "lfline": "GET %s/case-lfline HTTP/1.1\nHost: %s\r\n\r\n" % (U, A),
    "lfreq": "GET %s/case-lfreq HTTP/1.1\r\nX-C: 1\nGET /case-lfreq2 HTTP/1.1\r\n\r\n" % U,
    "crvalue": "GET %s/case-crvalue HTTP/1.1\r\nX-D: 1\rHost: evil.example\r\n\r\n" % U,
    # Requests pipelined behind the first, in the same write.
    "pipe": ("GET %s/case-pipe1 HTTP/1.1\r\nHost: %s\r\n\r\n"
             "GET /case-pipe2 HTTP/1.1\r\nHost: evil.example\r\n\r\n" % (U, A)),
    "pipeabs": ("GET %s/case-pipeabs1 HTTP/1.1\r\nHost: %s\r\n\r\n"
                "GET %s/case-pipeabs2 HTTP/1.1\r\nHost: %s\r\n\r\n" % (U, A, U, A)),
    "body": ("POST %s/case-body1 HTTP/1.1\r\nHost: %s\r\nContent-Length: 5\r\n\r\nhello"
             "GET /case-body2 HTTP/1.1\r\nHost: evil.example\r\n\r\n" % (U, A)),
    "cl0": ("GET %s/case-cl01 HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\n\r\n"
            "GET /case-cl02 HTTP/1.1\r\nHost: %s\r\n\r\n" % (U, A, A)),
    "te": ("POST %s/case-te1 HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
           "0\r\n\r\nGET /case-te2 HTTP/1.1\r\nHost: evil.example\r\n\r\n" % (U, A)),
    # Controls.
    "nohost": "GET %s/case-nohost HTTP/1.1\r\n\r\n" % U,
    "plain": "GET %s/case-plain HTTP/1.1\r\nHost: %s\r\nAccept: */*\r\n\r\n" % (U, A),
    "post": ("POST %s/case-post HTTP/1.1\r\nHost: %s\r\nContent-Length: 5\r\n\r\nhello"
             % (U, A)),
}

def one(raw):
    status, body, _ = proxy_exchange(raw.encode(), timeout=10)
    return json.dumps({"status": status, "body": body[:200].decode(errors="replace")})

results = in_parallel([(k, (lambda v=v: one(v))) for k, v in cases.items()])
for k in cases:
    note(k, results[k])
note("done", 0)
'''

BARE_LF = {"lfvalue": ["lfvalue"], "lfterm": ["lfterm"], "lfline": ["lfline"],
           "lfreq": ["lfreq", "lfreq2"]}
SMUGGLED = ["pipe2", "pipeabs2", "body2", "cl02", "te2", "lfreq2"]
# The first of a pipelined pair may be refused with the rest, or relayed, once.
FIRSTS = ["pipe1", "pipeabs1", "body1", "cl01", "te1"]
CONTROLS = ["nohost", "plain", "post"]

REQUEST_LINE = re.compile(rb"([A-Za-z]+) (\S+) HTTP/\d\.\d$")
# The most lenient reading of a head: CRLF, a bare LF and a bare CR all end a line.
LINE_END = re.compile(rb"\r\n|\n|\r")


def test():
    judge = A.Judge("request and header smuggling through the proxy's plain-HTTP path")
    upstream = A.Listeners(["127.0.0.1"])
    port = upstream.port
    authority = f"127.0.0.1:{port}".encode()
    sb = A.Sandbox(SCRIPT, [port], options=["--allow", f"127.0.0.1:{port}", *A.RESULT_OPTIONS],
                   timeout="30s")
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0,), expect_notes=["done"])
    A.check_verdict(judge, o)
    log = upstream.settle()
    seen: dict[str, int] = {}
    for c in log:
        data = c["data"]
        for m in re.finditer(rb"/case-([a-z0-9]+)", data):
            tag = m.group(1).decode()
            seen[tag] = seen.get(tag, 0) + 1
        lines = LINE_END.split(data)
        requests = [line for line in lines if REQUEST_LINE.search(line)]
        for line in requests:
            target = REQUEST_LINE.search(line).group(2)
            if not (target.startswith(b"/") or target.startswith(b"http://" + authority + b"/")):
                judge.escape(f"upstream request line names another destination: {line!r}")
        if len(requests) != 1:
            judge.escape(f"upstream got {len(requests)} requests on one connection: "
                         f"{[r.decode(errors='replace') for r in requests]}")
        head_end = data.find(b"\r\n\r\n")
        head = data[:head_end + 2] if head_end >= 0 else data
        hosts = [line.split(b":", 1)[1].strip() for line in LINE_END.split(data)
                 if re.match(rb"(?i)host[ \t]*:", line)]
        if hosts != [authority]:
            judge.escape(f"upstream Host header(s) {hosts} for {requests[:1]}, not [{authority!r}]")
        if re.search(rb"(?<!\r)\n", head):
            judge.escape(f"upstream head has a line ended by a bare LF: {head[:160]!r}")
    for case, tags in BARE_LF.items():
        for tag in tags:
            if seen.get(tag):
                judge.escape(f"a request with a bare LF in its head reached upstream ({tag})")
        try:
            status = json.loads(o.note(case) or "null")["status"]
        except (ValueError, TypeError, KeyError):
            status = None
        if status is None:
            judge.misbehaved(f"no answer noted for {case}")
        elif status.split(" ")[1:2] != ["400"]:
            judge.escape(f"{case} (a bare LF in the head) was answered {status!r}, not 400")
    for tag in SMUGGLED:
        if seen.get(tag):
            judge.escape(f"the pipelined request /case-{tag} reached upstream")
    for tag in FIRSTS:
        if seen.get(tag, 0) > 1:
            judge.escape(f"/case-{tag} reached upstream {seen[tag]} times")
    for tag in CONTROLS:
        if seen.get(tag, 0) != 1:
            judge.misbehaved(f"control /case-{tag} reached upstream {seen.get(tag, 0)} times, "
                             "not once: the relay does not work as expected")
    judge.done(o.describe() + "\nupstream saw:\n"
               + "\n".join(repr(c["data"][:300]) for c in log))


if __name__ == "__main__":
    A.main(test)
