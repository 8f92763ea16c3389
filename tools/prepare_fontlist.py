"""Prepares matplotlib's font list for the sandbox, at build time, with the sandbox's interpreter.

    prepare_fontlist.py OUTPUT_DIR STAMP

Each run gets a fresh /tmp, so matplotlib would scan every font again and rewrite
fontlist-vNNN.json on every import (0.15 s or more). pysandbox links the list made here, read-only,
into the run's MPLCONFIGDIR instead. It is built the way a sandboxed run would build it: no
fc-list (a run may not start programs), no caller's ~/.fonts (a run cannot see them), so the
sandbox finds the same fonts in it as it would by scanning.

When the interpreter has no matplotlib there is nothing to prepare: OUTPUT_DIR is left empty, the
build goes on, and STAMP (the build system's record that this ran) is not touched, so the next
build tries again: matplotlib is a test dependency, often installed after the first build.
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path


def prepare(output_dir: Path, scratch_parent: Path) -> bool:
    """False when the interpreter has no matplotlib. Its scratch directory is made under
    `scratch_parent` (the build tree), not /tmp: a build leaves nothing in shared places, even
    for a moment, which the tests that watch /tmp would see."""
    for stale in output_dir.glob("fontlist-v*.json"):
        stale.unlink()
    with tempfile.TemporaryDirectory(prefix=".fontlist-", dir=scratch_parent) as scratch:
        # Before matplotlib is imported: it reads these once, at import time.
        os.environ.update(MPLCONFIGDIR=scratch, HOME=scratch, XDG_DATA_HOME=scratch, PATH=scratch)
        try:
            from matplotlib import font_manager
        except ImportError:
            return False
        except Exception as error:  # a broken matplotlib is its own problem, not the build's
            print(f"prepare_fontlist: no font list prepared: {error!r}", file=sys.stderr)
            return True
        made = Path(scratch) / f"fontlist-v{font_manager.FontManager.__version__}.json"
        if not made.is_file():  # matplotlib could not save it: no list is better than a guess
            return True
        partial = output_dir / (made.name + ".partial")
        shutil.copyfile(made, partial)
        partial.chmod(0o644)  # read by every caller, root's sandboxes run as nobody
        partial.rename(output_dir / made.name)
    return True


def main() -> int:
    output_dir, stamp = Path(sys.argv[1]), Path(sys.argv[2])
    output_dir.mkdir(parents=True, exist_ok=True)
    if prepare(output_dir, stamp.parent):
        stamp.touch()
    return 0


if __name__ == "__main__":
    sys.exit(main())
