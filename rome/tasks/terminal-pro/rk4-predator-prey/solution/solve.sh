#!/bin/bash
python3 - <<'PY'
import json
p = json.load(open("/app/params.json"))
a, b, dl, g, h = p["alpha"], p["beta"], p["delta"], p["gamma"], p["dt"]
def rhs(s):
    x, y = s
    return (a * x - b * x * y, dl * x * y - g * y)
s = (p["x0"], p["y0"])
xs = [s[0]]
for _ in range(p["steps"]):
    k1 = rhs(s)
    k2 = rhs(tuple(v + h / 2 * k for v, k in zip(s, k1)))
    k3 = rhs(tuple(v + h / 2 * k for v, k in zip(s, k2)))
    k4 = rhs(tuple(v + h * k for v, k in zip(s, k3)))
    s = tuple(v + h / 6 * (q1 + 2 * q2 + 2 * q3 + q4) for v, q1, q2, q3, q4 in zip(s, k1, k2, k3, k4))
    xs.append(s[0])
json.dump({"t": p["steps"] * h, "x": s[0], "y": s[1]}, open("/app/final.json", "w"))
peaks = [i for i in range(1, len(xs) - 1) if xs[i - 1] < xs[i] > xs[i + 1]]
open("/app/prey_peaks.txt", "w").write("".join(f"{i}\n" for i in peaks))
PY
