"""The seed use case end to end: a CSV goes in, pandas cleans it, matplotlib plots it, the PNG
comes out with --output-dir; plt.show() saves figure-N.png."""

import hashlib
import json
import struct
import unittest

from harness import SandboxTestCase, temp_dir, write_file

CSV = "day,value\n1,10\n2,\n3,30\n4,oops\n5,50\n"


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR; fails on anything that is not a PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    assert data[12:16] == b"IHDR", data[12:16]
    return struct.unpack(">II", data[16:24])


class DataScienceTest(SandboxTestCase):
    def run_json(self, body, options=()):
        r = self.run_script(body, options=["-p", "datascience", "--json", *options], timeout=90)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 1, r.describe())
        return r, json.loads(lines[0])

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


if __name__ == "__main__":
    unittest.main()
