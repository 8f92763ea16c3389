"""The seed use case end to end: a CSV goes in, pandas cleans it, matplotlib plots it, the PNG
comes out with --output-dir; plt.show() saves figure-N.png. Importing matplotlib starts from the
font list prepared at build time instead of scanning every font in every run."""

import hashlib
import struct
import textwrap
import unittest
from pathlib import Path

from harness import PYSANDBOX, SandboxTestCase, parse_report, temp_dir, write_file

CSV = "day,value\n1,10\n2,\n3,30\n4,oops\n5,50\n"


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR; fails on anything that is not a PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    assert data[12:16] == b"IHDR", data[12:16]
    return struct.unpack(">II", data[16:24])


class DataScienceTest(SandboxTestCase):
    NEEDS_MODULES = ("numpy", "pandas", "matplotlib")

    def run_json(self, body, options=()):
        r = self.run_script(body, options=["-p", "datascience", "--json", *options], timeout=90)
        return r, r.json()

    def test_csv_in_clean_plot_png_out(self):
        data = write_file(temp_dir() / "data.csv", CSV)
        out = temp_dir(0o777)
        r, obj = self.run_json(
            """
            import pandas as pd
            import matplotlib.pyplot as plt
            df = pd.read_csv('data.csv')
            df['value'] = pd.to_numeric(df['value'], errors='coerce')
            df = df.dropna()
            df.to_csv('clean.csv', index=False)
            fig = plt.figure(figsize=(4, 3), dpi=50)
            plt.plot(df['day'], df['value'])
            plt.savefig('plot.png')
            print(len(df))
            """, options=["--input", str(data), "--output-dir", str(out)])
        self.assertEqual(obj["status"], "ok", r.describe())
        self.assertEqual(obj["stdout"], "3\n")
        png = (out / "plot.png").read_bytes()
        self.assertEqual(png_size(png), (200, 150))
        files = {entry["path"]: entry for entry in obj["files"]}
        self.assertEqual(sorted(files), ["clean.csv", "plot.png"])
        self.assertEqual(files["plot.png"]["sha256"], hashlib.sha256(png).hexdigest())
        self.assertEqual(files["plot.png"]["media_type"], "image/png")
        self.assertEqual(files["plot.png"]["size"], len(png))
        self.assertEqual((out / "clean.csv").read_text(), "day,value\n1,10.0\n3,30.0\n5,50.0\n")

    def test_show_saves_numbered_figures(self):
        r, obj = self.run_json(
            """
            import matplotlib.pyplot as plt
            plt.figure(figsize=(2, 1), dpi=100); plt.plot([1, 2])
            plt.show()
            plt.figure(figsize=(3, 1), dpi=100); plt.plot([2, 1])
            plt.show()
            print(plt.get_fignums())
            """)
        self.assertEqual(obj["status"], "ok", r.describe())
        self.assertEqual(obj["stdout"], "[]\n", "show() closes what it saved")
        files = {entry["path"]: entry for entry in obj["files"]}
        self.assertEqual(sorted(files), ["figure-1.png", "figure-2.png"])
        self.assertEqual(files["figure-2.png"]["media_type"], "image/png")


# matplotlib says at INFO when it scanned the fonts, at DEBUG which list it loaded instead (and,
# dropped here, a few hundred lines of font scores).
MATPLOTLIB_LOG = """
import logging
logging.basicConfig(level=logging.DEBUG)
logging.getLogger("PIL").setLevel(logging.INFO)
logging.getLogger("matplotlib.font_manager").addFilter(
    lambda record: not record.getMessage().startswith("findfont: score"))
"""
REBUILT = "generated new fontManager"
LOADED = "Using fontManager instance from /tmp/.matplotlib/fontlist-v"
PLOT_WITH_TEXT = """
import matplotlib.pyplot as plt
plt.figure(figsize=(2, 1), dpi=50); plt.plot([1, 2]); plt.title("fonts")
plt.savefig("plot.png")
"""


class MultiprocessingTest(SandboxTestCase):
    def test_pool_executor_and_queue_work(self):
        # They need POSIX semaphores (sem_open: a file in /dev/shm); datascience has a /dev/shm
        # of its own. Before it, mp.Pool failed with FileNotFoundError in SemLock.
        r = self.run_script("""
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor
            with mp.Pool(2) as pool:
                squares = pool.map(abs, [-1, -2, -3])
            with ProcessPoolExecutor(2) as executor:
                more = list(executor.map(abs, [-4, -5]))
            queue = mp.Queue()
            queue.put(7)
            report([squares, more, queue.get(timeout=10)])
            """, options=["-p", "datascience", "--json"], timeout=90)
        out = r.json()
        self.assertEqual(out["status"], "ok", r.describe())
        self.assertEqual(parse_report(out["stdout"].encode()), [[1, 2, 3], [4, 5], 7])


class FontListTest(SandboxTestCase):
    """The list comes from the build tree (or the install) next to the binary, read-only; each
    run gets its own copy, so nothing a run does to it reaches the next one."""

    NEEDS_MODULES = ("matplotlib",)

    def run_json(self, *parts):
        body = MATPLOTLIB_LOG + "".join(textwrap.dedent(part) for part in parts)
        r = self.run_script(body, options=["-p", "datascience", "--json"], timeout=90)
        return r, r.json()

    def test_the_build_prepared_a_font_list(self):
        data_dir = Path(PYSANDBOX).resolve().parent.parent / "share/pysandbox/matplotlib"
        lists = sorted(data_dir.glob("fontlist-v*.json"))
        self.assertEqual(len(lists), 1, f"{data_dir}: {lists}")
        self.assertIn('"ttflist"', lists[0].read_text())

    def test_import_loads_the_prepared_list_and_scans_nothing(self):
        r, obj = self.run_json(PLOT_WITH_TEXT)
        self.assertEqual(obj["status"], "ok", r.describe())
        self.assertIn(LOADED, obj["stderr"])
        self.assertNotIn(REBUILT, obj["stderr"])
        self.assertEqual(obj["violations"], [])
        self.assertEqual(sorted(f["path"] for f in obj["files"]), ["plot.png"])

    def test_a_stale_list_is_rebuilt_inside_the_run_and_only_there(self):
        # A font that is gone since the build: matplotlib finds the file missing, scans again and
        # rewrites its list in place, which needs a writable copy rather than a read-only link.
        r, obj = self.run_json("""
            import json
            import matplotlib
            from pathlib import Path
            [path] = Path(matplotlib.get_cachedir()).glob("fontlist-v*.json")
            data = json.loads(path.read_text())
            for font in data["ttflist"]:
                font["fname"] = "/usr/share/fonts/gone/" + font["fname"].rsplit("/", 1)[-1]
            path.write_text(json.dumps(data))
            """, PLOT_WITH_TEXT, """
            print("gone" in path.read_text())
            """)
        self.assertEqual(obj["status"], "ok", r.describe())
        self.assertIn(REBUILT, obj["stderr"])
        # The scan runs fc-list, which finds its settings (filesystem.ro has /etc/fonts).
        self.assertNotIn("Fontconfig error", obj["stderr"])
        self.assertEqual(obj["stdout"], "False\n", "the rebuilt list replaced the broken one")
        r, obj = self.run_json(PLOT_WITH_TEXT)
        self.assertEqual(obj["status"], "ok", r.describe())
        self.assertIn(LOADED, obj["stderr"])
        self.assertNotIn(REBUILT, obj["stderr"])

    def test_no_copy_lands_in_a_host_workdir(self):
        work = temp_dir(0o777)
        r = self.run_script("import os; print(sorted(os.listdir(os.environ['MPLCONFIGDIR'])))",
                            options=["-p", "datascience", "--workdir", str(work),
                                     "--env", "MPLCONFIGDIR=/tmp/work/mpl"])
        self.assertExit(r, 1)  # the directory was not made
        self.assertIn(b"FileNotFoundError", r.stderr)
        self.assertEqual(list(work.iterdir()), [])


if __name__ == "__main__":
    unittest.main()
