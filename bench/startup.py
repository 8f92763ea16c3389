#!/usr/bin/env python3
"""Start-up cost of pysandbox next to bare Python and other sandboxes.

Runs `hello.py` (prints one line) under each tool, interleaved round by round so that a slow
moment of the machine hits every tool alike, and prints the median and 90th percentile of the
wall-clock time of the whole command, in milliseconds, with each one's ratio to bare Python.

    bench/startup.py [--rounds 50] [--warmup 3] [--pysandbox PATH] [--compare LABEL=PATH]...
                     [--only NAME,...] [--json]

Tools (each is skipped, with a note, when it is not installed):

  python3    /usr/bin/python3 -s hello.py                 no isolation at all: the base
  floor      bench/floor.c: the kernel work of a namespace sandbox and nothing else (every
             namespace, tmpfs root, read-only /usr, /tmp, three devices, /proc, pivot_root, an
             init); what a sandbox cannot go below. Built by CMake (build/bench/floor), or here
             with cc when that is missing or older than its source.
  pysandbox  pysandbox run hello.py                        default profile
  bwrap      bubblewrap with the same isolation as pysandbox's default profile (see BWRAP_ARGS)
  firejail   firejail --noprofile with its hardening options (see firejail_command)

--compare adds another pysandbox binary (a build of another commit, say) to the same rounds.

Standard library only. See bench/README.md for what the numbers mean and what they do not.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
HELLO = BENCH / "hello.py"
EXPECTED_STDOUT = b"hello\n"
PYTHON = "/usr/bin/python3"

# Every child gets the same small environment, so no tool pays for (or profits from) whatever
# the caller's environment holds. It mirrors what pysandbox's default profile sets inside.
CHILD_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": os.environ.get("HOME", "/root"),
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}


class Tool(NamedTuple):
    name: str
    argv: list[str]
    note: str


def default_pysandbox() -> str:
    return os.environ.get("PYSANDBOX", str(REPO / "build" / "bin" / "pysandbox"))


def floor_binary() -> tuple[str | None, str]:
    """build/bench/floor when CMake built it from the current source, else a fresh cc build."""
    source = BENCH / "floor.c"
    built = REPO / "build" / "bench" / "floor"
    if built.exists() and built.stat().st_mtime >= source.stat().st_mtime:
        return str(built), ""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None, "floor: no C compiler to build bench/floor.c (or build it with CMake)"
    out = Path(tempfile.mkdtemp(prefix="pysandbox-floor-")) / "floor"
    done = subprocess.run([compiler, "-O2", "-o", str(out), str(source)], capture_output=True)
    if done.returncode != 0:
        return None, f"floor: cc failed: {done.stderr.decode(errors='replace')[:500]}"
    out.parent.chmod(0o755)  # run as another user, the file must be reachable
    return str(out), ""


def bwrap_root_links() -> list[str]:
    """/bin, /lib, /lib64, /sbin as the host has them: symlinks (merged /usr) or directories."""
    args: list[str] = []
    for top in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args


def bwrap_command(bwrap: str, script: Path = HELLO) -> list[str]:
    # The isolation of pysandbox's default profile, as far as bwrap's options reach:
    # every namespace (user and cgroup required, not "-try"), the same read-only host paths, a
    # fresh tmpfs /tmp as the cwd, fresh /proc and a minimal /dev, a new session, no capabilities,
    # an empty environment plus the profile's variables, uid 1000 inside, hostname "sandbox".
    # Not reproduced: pysandbox's seccomp filter (bwrap only loads a BPF program you compile and
    # pass as --seccomp FD), Landlock, rlimits, the size cap of /tmp, and its supervisor (deadline,
    # output caps). So bwrap here does somewhat less work than pysandbox.
    args = [bwrap,
            "--unshare-all", "--unshare-user", "--unshare-cgroup",
            "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
            "--ro-bind", "/usr", "/usr", *bwrap_root_links()]
    for etc in ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives"):
        if os.path.lexists(etc):
            args += ["--ro-bind", etc, etc]
    args += ["--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev",
             "--ro-bind", str(script), f"/sandbox/{script.name}", "--chdir", "/tmp",
             "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
    for name, value in (("PATH", "/usr/local/bin:/usr/bin:/bin"), ("HOME", "/tmp"),
                        ("TMPDIR", "/tmp"), ("LANG", "C.UTF-8"),
                        ("PYTHONDONTWRITEBYTECODE", "1")):
        args += ["--setenv", name, value]
    return args + [PYTHON, "-s", f"/sandbox/{script.name}"]


def firejail_command(firejail: str) -> tuple[list[str], str]:
    # Checked on this machine (firejail 0.9.72, setuid root, run as root): every option below is
    # accepted, but --noroot is documented as "not supported for sandboxes started as root" and is
    # silently not applied: the script runs as uid 0 inside (with every capability dropped and
    # no_new_privs). Running firejail as an unprivileged user instead needs that user listed in
    # /etc/firejail/firejail.users, which this benchmark does not change. --private makes $HOME an
    # empty tmpfs and --private-tmp hides /tmp, so hello.py must live elsewhere (it is in bench/).
    argv = [firejail, "--quiet", "--noprofile", "--net=none", "--private", "--private-tmp",
            "--caps.drop=all", "--seccomp", "--nonewprivs", "--noroot",
            PYTHON, "-s", str(HELLO)]
    note = "as root: --noroot not applied (uid 0 inside, no caps)" if os.geteuid() == 0 else ""
    return argv, note


def available_tools(pysandbox: str, compare: list[str]) -> tuple[list[Tool], list[str]]:
    tools = [Tool("python3", [PYTHON, "-s", str(HELLO)], "no isolation")]
    skipped: list[str] = []
    floor, why = floor_binary()
    if floor:
        tools.append(Tool("floor", [floor, str(HELLO)], "namespaces, mounts, init: nothing else"))
    else:
        skipped.append(why)
    if os.access(pysandbox, os.X_OK):
        tools.append(Tool("pysandbox", [pysandbox, "run", str(HELLO)], "default profile"))
    else:
        skipped.append(f"pysandbox: {pysandbox} not found (build it, or pass --pysandbox)")
    for spec in compare:
        label, _, path = spec.partition("=")
        if not path or not os.access(path, os.X_OK):
            raise SystemExit(f"startup.py: --compare {spec}: expected LABEL=PATH to a binary")
        tools.append(Tool(f"pysandbox@{label}", [path, "run", str(HELLO)], path))
    if bwrap := shutil.which("bwrap"):
        tools.append(Tool("bwrap", bwrap_command(bwrap), "all namespaces, no seccomp"))
    else:
        skipped.append("bwrap: not installed")
    if firejail := shutil.which("firejail"):
        argv, note = firejail_command(firejail)
        tools.append(Tool("firejail", argv, note))
    else:
        skipped.append("firejail: not installed")
    return tools, skipped


def run_once(tool: Tool) -> float:
    """Milliseconds for one complete run; raises if the tool did not print hello."""
    start = time.perf_counter_ns()
    proc = subprocess.run(tool.argv, stdin=subprocess.DEVNULL, capture_output=True,
                          env=CHILD_ENV, cwd=BENCH, timeout=60)
    elapsed = (time.perf_counter_ns() - start) / 1e6
    if proc.returncode != 0 or proc.stdout != EXPECTED_STDOUT:
        raise RuntimeError(
            f"{tool.name} failed (exit {proc.returncode}):\n  command: {' '.join(tool.argv)}\n"
            f"  stdout: {proc.stdout[:500]!r}\n  stderr: {proc.stderr[:2000]!r}")
    return elapsed


def percentile(samples: list[float], fraction: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(samples)
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def measure(tools: list[Tool], rounds: int, warmup: int) -> dict[str, list[float]]:
    for tool in tools:  # every tool must work before anything is timed
        for _ in range(max(warmup, 1)):
            run_once(tool)
    samples: dict[str, list[float]] = {tool.name: [] for tool in tools}
    for round_number in range(rounds):
        # Rotate the order so that no tool always runs first (cold) or right after another.
        shift = round_number % len(tools)
        for tool in tools[shift:] + tools[:shift]:
            samples[tool.name].append(run_once(tool))
    return samples


def summarize(tools: list[Tool], samples: dict[str, list[float]]) -> list[dict]:
    bare = samples[tools[0].name]
    bare_median, bare_p90 = statistics.median(bare), percentile(bare, 0.9)
    rows = []
    for tool in tools:
        values = samples[tool.name]
        median, p90 = statistics.median(values), percentile(values, 0.9)
        rows.append({"tool": tool.name, "median_ms": median, "p90_ms": p90,
                     "min_ms": min(values), "ratio_median": median / bare_median,
                     "ratio_p90": p90 / bare_p90, "runs": len(values), "note": tool.note})
    return rows


def machine() -> str:
    """Where the numbers were taken, for the table's first line."""
    return (f"{platform.node()}, Linux {platform.release()}, uid {os.geteuid()}, "
            f"{os.cpu_count()} CPUs")


def print_table(rows: list[dict], rounds: int, skipped: list[str]) -> None:
    print(f"hello.py start-up, {rounds} interleaved rounds; {machine()}")
    width = max(10, *(len(row["tool"]) for row in rows))
    header = (f"{'tool':<{width}} {'median ms':>10} {'p90 ms':>8} {'min ms':>8} "
              f"{'x bare (median)':>16} {'x bare (p90)':>13}  note")
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row['tool']:<{width}} {row['median_ms']:>10.1f} {row['p90_ms']:>8.1f} "
              f"{row['min_ms']:>8.1f} {row['ratio_median']:>16.2f} {row['ratio_p90']:>13.2f}"
              f"  {row['note']}")
    by_name = {row["tool"]: row for row in rows}
    if "floor" in by_name:
        floor = by_name["floor"]["ratio_median"]
        for row in rows:
            if row["tool"] not in ("python3", "floor"):
                print(f"{row['tool']}: {100 * (row['ratio_median'] / floor - 1):+.1f} % of the "
                      "floor's ratio to bare python (median)")
    for line in skipped:
        print(f"skipped: {line}")


def parse_options(description: str, rounds: int, more=lambda parser: None) -> argparse.Namespace:
    """--rounds, --warmup, --pysandbox and --json, as each benchmark here takes them, and `more`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rounds", type=int, default=rounds,
                        help=f"timed rounds (default {rounds})")
    parser.add_argument("--warmup", type=int, default=3,
                        help="untimed runs of each first (default 3; at least 1 checks it)")
    parser.add_argument("--pysandbox", default=default_pysandbox(),
                        help="the binary (default: $PYSANDBOX or <repo>/build/bin/pysandbox)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    more(parser)
    options = parser.parse_args()
    if options.rounds < 1:
        parser.error("--rounds must be at least 1")
    return options


def more_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--compare", action="append", default=[], metavar="LABEL=PATH",
                        help="another pysandbox binary in the same rounds (repeatable)")
    parser.add_argument("--only", default="",
                        help="comma-separated tools to run; python3 is always run as the base")


def main() -> int:
    options = parse_options(__doc__.splitlines()[0], 50, more_options)

    tools, skipped = available_tools(os.path.abspath(options.pysandbox), options.compare)
    if options.only:
        wanted = {"python3", *options.only.split(",")}
        tools = [tool for tool in tools
                 if tool.name in wanted or tool.name.startswith("pysandbox@")]
    try:
        samples = measure(tools, options.rounds, options.warmup)
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        print(f"startup.py: {error}", file=sys.stderr)
        return 1
    rows = summarize(tools, samples)
    if options.json:
        json.dump({"rounds": options.rounds, "rows": rows, "skipped": skipped,
                   "samples_ms": samples}, sys.stdout, indent=2)
        print()
    else:
        print_table(rows, options.rounds, skipped)
    return 0


if __name__ == "__main__":
    sys.exit(main())
