"""Data-science workload: numpy, pandas, matplotlib (Agg), multiprocessing.Pool(2), threads,
sqlite3, zlib, json, hashlib. Writes only under $OUT (default /tmp/ds_work)."""
import concurrent.futures
import datetime as dt
import hashlib
import io
import json
import multiprocessing
import os
import sqlite3
import sys
import zlib

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

OUT = os.environ.get("OUT", "/tmp/ds_work")
os.makedirs(OUT, exist_ok=True)


def square_sum(n):
    a = np.arange(n, dtype=np.float64)
    return float((a * a).sum())


def main():
    rng = np.random.default_rng(42)
    a = rng.normal(size=(200, 200)) + np.eye(200) * 10
    b = rng.normal(size=200)
    x = np.linalg.solve(a, b)
    assert np.allclose(a @ x, b)
    f = np.fft.rfft(rng.random(4096))
    ev = np.linalg.eigvals(rng.random((50, 50)))
    u, s, vt = np.linalg.svd(rng.random((100, 60)), full_matrices=False)
    big = rng.random((1500, 1500)) @ rng.random((1500, 300))  # BLAS, maybe threaded
    print("numpy ok", x[:2], abs(f[1]), len(ev), s[0], big.shape)

    n = 5000
    df = pd.DataFrame({
        "id": np.arange(n),
        "group": rng.choice(list("abcde"), size=n),
        "value": rng.normal(size=n),
        "when": pd.date_range("2024-01-01", periods=n, freq="h"),
    })
    csv_path = os.path.join(OUT, "data.csv")
    df.to_csv(csv_path, index=False)
    df2 = pd.read_csv(csv_path, parse_dates=["when"])
    g = df2.groupby("group")["value"].agg(["mean", "std", "count"])
    other = pd.DataFrame({"group": list("abcde"), "label": ["A", "B", "C", "D", "E"]})
    merged = df2.merge(other, on="group").sort_values("when")
    merged["day"] = merged["when"].dt.floor("D")
    daily = merged.groupby("day")["value"].sum().rolling(7).mean()
    merged["tz"] = merged["when"].dt.tz_localize("UTC").dt.tz_convert("Europe/Paris")
    merged.to_csv(os.path.join(OUT, "merged.csv"), index=False)
    try:
        merged.to_parquet(os.path.join(OUT, "merged.parquet"))
        print("parquet ok")
    except Exception as e:  # no pyarrow/fastparquet on Debian 12
        print("parquet unavailable:", type(e).__name__)
    merged.to_json(os.path.join(OUT, "merged.json"), orient="records", date_format="iso")
    pd.read_json(os.path.join(OUT, "merged.json"))
    print("pandas ok", g.shape, len(merged), daily.dropna().shape, pd.Timestamp.now().year)

    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    axes[0].plot(daily.index, daily.values, label="rolling")
    axes[0].legend()
    axes[0].set_title("Rolling mean (°C) — ünïcode")
    axes[1].hist(df2["value"], bins=40)
    axes[1].text(0, 10, r"$\alpha^2 + \beta$", fontsize=12)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "plot.png"), dpi=80)
    fig.savefig(os.path.join(OUT, "plot.svg"))
    fig.savefig(os.path.join(OUT, "plot.pdf"))
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    print("matplotlib ok", len(buf.getvalue()))

    if not os.environ.get("NOPROC"):
        with multiprocessing.Pool(2) as pool:
            r = pool.map(square_sum, [10_000, 20_000, 30_000, 40_000])
        print("pool ok", r[0])

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        r = list(ex.map(square_sum, range(1000, 9000, 1000)))
    print("threads ok", len(r))
    if not os.environ.get("NOPROC"):
        with concurrent.futures.ProcessPoolExecutor(2) as ex:
            r = list(ex.map(square_sum, range(1000, 5000, 1000)))
        print("procpool ok", len(r))

    db = sqlite3.connect(os.path.join(OUT, "t.db"))
    db.execute("create table if not exists t(k integer primary key, v text, ts text)")
    db.executemany("insert into t(v, ts) values (?, ?)",
                   [(str(i), dt.datetime.now().isoformat()) for i in range(1000)])
    db.commit()
    print("sqlite ok", db.execute("select count(*) from t").fetchone()[0])
    df2.head(100).to_sql("frame", db, if_exists="replace")
    pd.read_sql("select * from frame", db)
    db.close()
    mem = sqlite3.connect(":memory:")
    mem.execute("create table x(a)")
    mem.close()

    blob = json.dumps(df2.head(200).astype(str).to_dict("records")).encode()
    z = zlib.compress(blob, 9)
    assert zlib.decompress(z) == blob
    print("hash", hashlib.sha256(z).hexdigest()[:16], hashlib.md5(blob).hexdigest()[:8],
          hashlib.blake2b(blob).hexdigest()[:8])


if __name__ == "__main__":
    main()
    sys.stdout.flush()
