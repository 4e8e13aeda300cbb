import csv
import sys

pts = {}
for row in csv.DictReader(open("/app/samples.csv")):
    pts.setdefault(float(row["x"]), []).append(float(row["y"]))
xs = sorted(pts)
ys = [sum(pts[x]) / len(pts[x]) for x in xs]
want = sum((xs[i + 1] - xs[i]) * (ys[i] + ys[i + 1]) / 2 for i in range(len(xs) - 1))
try:
    got = float(open("/app/integral.txt").read().strip())
except (OSError, ValueError) as exc:
    sys.exit(f"cannot read /app/integral.txt: {exc}")
if abs(got - want) > 1e-7 * max(1.0, abs(want)):
    sys.exit(f"integral {got}, expected {want}")
print("integral ok")
