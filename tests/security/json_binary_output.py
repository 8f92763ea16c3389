#!/usr/bin/python3
"""Blow up the --json result with output that JSON escapes expensively.

--output-limit bounds the bytes kept, not the result: a NUL byte is kept as one byte and
written into JSON as the six characters \u0000, in "stdout" and again in "output", so 16 MiB
of NULs on stdout (at the default 16 MiB output limit) makes a result of about 200 MiB that the
caller must read and parse. The script writes 16 MiB of b"\0" to stdout and exits 0.

Contained when pysandbox's stdout (the result) is under 40 MiB, parses as one JSON object,
has status "output_limit" or "ok", and its stdout says what the script wrote: with
encoding.stdout "base64" it decodes to NULs only (around an omission marker, if cut); as text
it is NULs only (likewise).
"""
import base64
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

NO_KERNEL = (  # no kernel variant (attack.py, PYSANDBOX_VIA)
    "the size of the --json result's escaped output: a kernel prints no result (its streams are "
    "Jupyter's text messages)"
)

MAX_RESULT = 40 << 20

SCRIPT = r'''
import sys
sys.stdout.buffer.write(b"\0" * (16 << 20))
sys.stdout.buffer.flush()
'''

MARKER = re.compile(rb"\n?\[\.\.\. \d+ bytes omitted \.\.\.\]\n?")  # with its own newlines


def test():
    judge = A.Judge("16 MiB of NUL bytes on stdout under --json")
    sb = A.Sandbox(SCRIPT, options=["--json"], timeout="30s", keep=MAX_RESULT + (1 << 20))
    o = sb.run()
    A.check_behaved(judge, sb, allowed=(0,))
    total = sb._readers[0].total
    if total >= MAX_RESULT:
        judge.escape(f"the --json result is {total / (1 << 20):.0f} MiB")
        judge.done(f"exit {o.rc}, {o.elapsed:.2f}s, result {total} bytes, head "
                   f"{o.stdout[:300]!r}")
    try:
        r = json.loads(o.stdout)
    except ValueError as e:
        judge.misbehaved(f"the result does not parse: {e}")
        judge.done(f"result head {o.stdout[:300]!r}")
    if r.get("status") not in ("output_limit", "ok"):
        judge.misbehaved(f"status {r.get('status')!r}, not output_limit or ok")
    encoding = r.get("encoding") if isinstance(r.get("encoding"), dict) else {}
    text = r.get("stdout")
    if not isinstance(text, str):
        judge.misbehaved(f"stdout is {type(text).__name__}, not a string")
    else:
        if encoding.get("stdout") == "base64":
            try:
                data = base64.b64decode(text, validate=True)
            except ValueError as e:
                judge.misbehaved(f"encoding.stdout is base64 but stdout does not decode: {e}")
                data = b""
        else:
            data = text.encode("utf-8", "surrogateescape")
        rest = MARKER.sub(b"", data)
        if not data or rest.strip(b"\0"):
            judge.misbehaved(f"stdout ({encoding.get('stdout', 'text')}) is not the script's NUL "
                             f"bytes: {data[:80]!r}")
    judge.done(f"exit {o.rc}, {o.elapsed:.2f}s, result {total} bytes, status {r.get('status')}, "
               f"encoding {encoding}")


if __name__ == "__main__":
    A.main(test)
