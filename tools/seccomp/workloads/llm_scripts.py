"""A handful of 'typical LLM-generated' stdlib-only scripts, run in one process one after
another: CSV in, regex, datetime, statistics, collections, json/text out to /tmp."""
import argparse
import collections
import csv
import datetime as dt
import json
import logging
import math
import os
import random
import re
import statistics
import string
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, asdict
from pathlib import Path

OUT = Path(os.environ.get("OUT", "/tmp/llm_work"))
OUT.mkdir(parents=True, exist_ok=True)
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("llm")


@dataclass
class Sale:
    region: str
    day: dt.date
    amount: float


def make_csv(path):
    rnd = random.Random(1)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["region", "date", "amount", "email"])
        for i in range(2000):
            d = dt.date(2024, 1, 1) + dt.timedelta(days=rnd.randrange(365))
            w.writerow([rnd.choice(["north", "south", "east", "west"]), d.isoformat(),
                        f"{rnd.uniform(1, 500):.2f}", f"user{i}@example.com"])


def script_sales(path):
    sales = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            sales.append(Sale(row["region"], dt.date.fromisoformat(row["date"]), float(row["amount"])))
    by_region = collections.defaultdict(list)
    for s in sales:
        by_region[s.region].append(s.amount)
    summary = {r: {"mean": statistics.mean(v), "median": statistics.median(v),
                   "stdev": statistics.stdev(v), "n": len(v)} for r, v in by_region.items()}
    months = collections.Counter(s.day.strftime("%Y-%m") for s in sales)
    (OUT / "summary.json").write_text(json.dumps(summary, indent=2))
    with open(OUT / "months.csv", "w", newline="") as f:
        csv.writer(f).writerows(sorted(months.items()))
    log.info("sales: %d rows, %d regions", len(sales), len(summary))
    return asdict(sales[0])


def script_regex(path):
    text = Path(path).read_text()
    emails = re.findall(r"[\w.+-]+@[\w-]+\.[\w.]+", text)
    dates = re.findall(r"\b(\d{4})-(\d{2})-(\d{2})\b", text)
    words = collections.Counter(re.split(r"\W+", text.lower()))
    log.info("regex: %d emails, %d dates, top %s", len(emails), len(dates), words.most_common(2))


def script_dates():
    now = dt.datetime.now()
    utc = dt.datetime.now(dt.timezone.utc)
    local = time.localtime()
    days = [(dt.date(2024, 1, 1) + dt.timedelta(days=i)).strftime("%A") for i in range(30)]
    start = time.perf_counter(); time.sleep(0.01); el = time.perf_counter() - start
    try:
        import zoneinfo
        paris = dt.datetime(2024, 6, 1, 12, tzinfo=zoneinfo.ZoneInfo("Europe/Paris"))
        log.info("zoneinfo: %s", paris.astimezone(dt.timezone.utc))
    except Exception as e:
        log.info("zoneinfo unavailable: %s", e)
    log.info("dates: %s %s %s %s %.3f", now.isoformat(), utc.tzname(), time.strftime("%Z", local),
             collections.Counter(days).most_common(1), el)


def script_text():
    words = ["".join(random.choices(string.ascii_lowercase, k=random.randint(2, 9))) for _ in range(500)]
    para = textwrap.fill(" ".join(words), width=72)
    with tempfile.NamedTemporaryFile("w", delete=False, suffix=".txt", dir=OUT) as f:
        f.write(para)
        name = f.name
    with tempfile.TemporaryDirectory(dir=OUT) as d:
        p = Path(d) / "x.txt"
        p.write_text("hello")
        list(Path(d).glob("*.txt"))
    os.replace(name, OUT / "para.txt")
    primes = [n for n in range(2, 5000) if all(n % p for p in range(2, int(math.isqrt(n)) + 1))]
    fib = [0, 1]
    for _ in range(90):
        fib.append(fib[-1] + fib[-2])
    log.info("text: %d chars, %d primes, fib90=%d", len(para), len(primes), fib[-1])
    print(json.dumps({"primes": len(primes)}), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1)
    args = ap.parse_args()
    path = OUT / "sales.csv"
    make_csv(path)
    for _ in range(args.n):
        print(script_sales(path))
        script_regex(path)
        script_dates()
        script_text()
    print(sorted(os.listdir(OUT))[:5], os.getcwd() != "", os.cpu_count())
    try:
        input_text = sys.stdin.read()
        print("stdin bytes", len(input_text))
    except Exception:
        pass


if __name__ == "__main__":
    main()
