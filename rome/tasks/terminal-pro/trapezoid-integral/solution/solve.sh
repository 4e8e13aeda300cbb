#!/bin/bash
python3 - <<'PY'
import csv
from collections import defaultdict
acc = defaultdict(list)
for r in csv.DictReader(open("/app/samples.csv")):
    acc[float(r["x"])].append(float(r["y"]))
xs = sorted(acc)
ys = [sum(acc[x]) / len(acc[x]) for x in xs]
total = sum((b - a) * (ya + yb) / 2 for a, b, ya, yb in zip(xs, xs[1:], ys, ys[1:]))
open("/app/integral.txt", "w").write(f"{total:.12f}\n")
PY
