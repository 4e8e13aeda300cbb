#!/bin/bash
python3 - <<'PY'
import csv, json, math
data = [[float(v) for v in r] for r in list(csv.reader(open("/app/data.csv")))[1:]]
n = len(data)
cols = list(zip(*[r[:3] for r in data]))
mean = [sum(c) / n for c in cols]
std = [math.sqrt(sum((v - m) ** 2 for v in c) / n) for c, m in zip(cols, mean)]
X = [[(r[j] - mean[j]) / std[j] for j in range(3)] for r in data]
y = [r[3] for r in data]
w, b = [0.0, 0.0, 0.0], 0.0
sig = lambda z: 1 / (1 + math.exp(-z))
for _ in range(500):
    p = [sig(b + sum(a * c for a, c in zip(w, x))) for x in X]
    err = [pi - yi for pi, yi in zip(p, y)]
    gw = [sum(e * x[j] for e, x in zip(err, X)) / n + 0.01 * w[j] for j in range(3)]
    gb = sum(err) / n
    w = [a - 0.5 * g for a, g in zip(w, gw)]
    b -= 0.5 * gb
p = [sig(b + sum(a * c for a, c in zip(w, x))) for x in X]
loss = -sum(t * math.log(q) + (1 - t) * math.log(1 - q) for q, t in zip(p, y)) / n + 0.005 * sum(a * a for a in w)
acc = sum((q >= 0.5) == (t == 1) for q, t in zip(p, y)) / n
json.dump({"w": w, "b": b, "loss": loss, "accuracy": acc}, open("/app/model.json", "w"))
PY
