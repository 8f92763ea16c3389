# The uploaded CSV (--input examples/data.csv) is cleaned with pandas and plotted with matplotlib;
# plot.png is an artifact: listed in --json's "files", copied out with --output-dir DIR (a new or
# empty DIR) or, run after run, --output-runs DIR (a new DIR/run-N each time).
#
#   pysandbox run -p datascience --input examples/data.csv --output-runs plots examples/plot_csv.py
import matplotlib.pyplot as plt
import pandas as pd

df = pd.read_csv("data.csv")
df["sales"] = pd.to_numeric(df["sales"], errors="coerce")
clean = df.dropna()
print(f"{len(df) - len(clean)} rows dropped, {len(clean)} kept, mean sales {clean['sales'].mean():.1f}")

plt.figure(figsize=(6, 4), dpi=100)
plt.plot(clean["month"], clean["sales"], marker="o")
plt.title("Sales by month")
plt.savefig("plot.png")
print("saved plot.png")
