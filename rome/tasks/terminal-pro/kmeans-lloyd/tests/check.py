import csv
import json
import sys

P = [(float(r["x"]), float(r["y"])) for r in csv.DictReader(open("/app/points.csv"))]
d2 = lambda a, b: (a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2
C = [P[0]]
while len(C) < 5:
    far = [min(d2(p, c) for c in C) for p in P]
    C.append(P[max(range(len(P)), key=lambda i: (far[i], -i))])
assign, iters = None, 0
while True:
    iters += 1
    new = [min(range(5), key=lambda k: (d2(p, C[k]), k)) for p in P]
    if new == assign:
        break
    assign = new
    for k in range(5):
        mem = [p for p, a in zip(P, assign) if a == k]
        if mem:
            C[k] = (sum(p[0] for p in mem) / len(mem), sum(p[1] for p in mem) / len(mem))
inertia = sum(d2(p, C[a]) for p, a in zip(P, assign))
sizes = [assign.count(k) for k in range(5)]
try:
    got = json.load(open("/app/clusters.json"))
except (OSError, ValueError) as exc:
    sys.exit(f"cannot read /app/clusters.json: {exc}")
if got.get("sizes") != sizes or got.get("iterations") != iters:
    sys.exit(f"sizes/iterations {got.get('sizes')}/{got.get('iterations')}, expected {sizes}/{iters}")
for k, (g, w) in enumerate(zip(got["centroids"], C)):
    if abs(g[0] - w[0]) > 1e-6 or abs(g[1] - w[1]) > 1e-6:
        sys.exit(f"centroid {k} = {g}, expected {w}")
if abs(got["inertia"] - inertia) > 1e-6 * inertia:
    sys.exit(f"inertia {got['inertia']}, expected {inertia}")
print("kmeans ok")
