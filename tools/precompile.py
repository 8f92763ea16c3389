"""Compiles the sandbox's own Python modules at build time, with the sandbox's interpreter.

    precompile.py OUTPUT_DIR SOURCE...

Each run writes these modules into a fresh, read-only /sandbox/.pysandbox, where Python can
neither find nor write a bytecode cache, so it would compile them on every start (about a
millisecond for the audit hook). The caches made here are written next to them instead. They
are unchecked-hash .pyc files (PEP 552): valid whatever the source's timestamp. Their names
carry the interpreter's cache tag (cpython-311), so another interpreter ignores them and
compiles the source as before.
"""

import py_compile
import sys
from pathlib import Path


def main() -> None:
    output = Path(sys.argv[1])
    output.mkdir(parents=True, exist_ok=True)
    for old in output.glob("*.pyc"):
        old.unlink()
    for source in map(Path, sys.argv[2:]):
        target = output / f"{source.stem}.{sys.implementation.cache_tag}.pyc"
        py_compile.compile(str(source), cfile=str(target), doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)


if __name__ == "__main__":
    main()
