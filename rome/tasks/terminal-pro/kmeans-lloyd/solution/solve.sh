#!/bin/bash
python3 - <<'PY'
import csv, json
pts = [(float(r["x"]), float(r["y"])) for r in csv.DictReader(open("/app/points.csv"))]
K = 5
def dist(a, b):
    return (a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2
cent = [pts[0]]
while len(cent) < K:
    best_i, best_d = 0, -1.0
    for i, p in enumerate(pts):
        dd = min(dist(p, c) for c in cent)
        if dd > best_d:
            best_i, best_d = i, dd
    cent.append(pts[best_i])
labels, passes = None, 0
while True:
    passes += 1
    new = []
    for p in pts:
        ds = [dist(p, c) for c in cent]
        new.append(ds.index(min(ds)))
    if new == labels:
        break
    labels = new
    for k in range(K):
        mem = [p for p, l in zip(pts, labels) if l == k]
        if mem:
            cent[k] = (sum(x for x, _ in mem) / len(mem), sum(y for _, y in mem) / len(mem))
json.dump({"centroids": [list(c) for c in cent], "sizes": [labels.count(k) for k in range(K)],
           "iterations": passes, "inertia": sum(dist(p, cent[l]) for p, l in zip(pts, labels))},
          open("/app/clusters.json", "w"))
PY
