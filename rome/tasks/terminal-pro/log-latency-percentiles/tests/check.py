import csv
import math
import re
import sys

LINE = re.compile(r"^\S+Z (\w+) (\S+) (\d{3}) (\d+(?:\.\d+)?)ms$")
times: dict[str, list[float]] = {}
for line in open("/app/access.log"):
    m = LINE.match(line.strip())
    if not m or int(m.group(3)) >= 500:
        continue
    times.setdefault(f"{m.group(1)} {m.group(2).split('?')[0]}", []).append(float(m.group(4)))
try:
    rows = list(csv.reader(open("/app/latency.csv")))
except OSError as exc:
    sys.exit(f"cannot read /app/latency.csv: {exc}")
if not rows or rows[0] != ["endpoint", "count", "p50", "p95", "p99"]:
    sys.exit(f"bad header: {rows[:1]}")
if [r[0] for r in rows[1:]] != sorted(times):
    sys.exit(f"endpoints: got {[r[0] for r in rows[1:]]}, expected {sorted(times)}")
for row in rows[1:]:
    vals = sorted(times[row[0]])
    want = [len(vals)] + [vals[math.ceil(p / 100 * len(vals)) - 1] for p in (50, 95, 99)]
    got = [int(row[1])] + [float(x) for x in row[2:]]
    if got[0] != want[0] or any(abs(a - b) > 0.051 for a, b in zip(got[1:], want[1:])):
        sys.exit(f"{row[0]}: got {got}, expected {want}")
print("latency ok")
