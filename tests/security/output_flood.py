#!/usr/bin/python3
"""Flood the caller with output: 256 MiB on stdout and stderr, interleaved, as fast as possible.

Run with --output-limit 1MiB. Judged from the host by counting every byte that reaches the
caller's pipes (through a kernel, its client's messages): no more than the limit (head and tail kept, with a marker) plus slack (through
MCP twice the limit: its answer holds the output twice); the run ends (the script's exit, a
signal, or the wall-clock limit), never hangs the caller. And the flood happened: pysandbox
reports at least 64 MiB omitted (a script that wrote nothing would pass the count).
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A

LIMIT = 1 << 20
SLACK = 64 << 10

SCRIPT = r'''
import os
chunk = b"x" * (1 << 20)
for i in range(256):
    try:
        os.write(1 if i % 2 == 0 else 2, chunk)
    except OSError:
        break
'''


def test():
    judge = A.Judge("output flood under --output-limit 1MiB")
    sb = A.Sandbox(SCRIPT, options=["--output-limit", "1MiB"], timeout="5s", keep=4 << 20)
    o = sb.run()
    allowed = (0, 1, A.TIMEOUT) + tuple(A.signalled(s) for s in (9, 13, 25))
    A.check_behaved(judge, sb, allowed=allowed)
    total = sum(r.total for r in sb._readers)
    if A.VIA == "kernel":  # the caller is the kernel's client: its messages count too
        total = len(o.front_output)
    # An MCP answer carries the kept output twice, by design: as its text content (for the
    # model) and in structuredContent (pysandbox(1), MCP SERVER). The limit holds for each copy.
    copies = 2 if A.VIA == "mcp" else 1
    judge.check(total <= copies * LIMIT + SLACK,
                f"{total >> 20} MiB reached the caller under --output-limit 1MiB"
                + (f" ({copies} copies of the output)" if copies > 1 else ""))
    # The flood must have happened, or the small total means nothing: pysandbox's own account
    # of what it dropped.
    omitted = re.search(rb"output limit of 1MiB reached; (\d+) bytes omitted", o.stderr)
    if not omitted or int(omitted.group(1)) < (64 << 20):
        judge.misbehaved("pysandbox reports no flood (output limit reached, at least 64 MiB "
                         f"omitted): nothing was tested; it said {omitted and omitted.group(0)}")
    judge.done(f"exit {o.rc}, {total} bytes delivered, {o.elapsed:.2f}s")


if __name__ == "__main__":
    A.main(test)
