#!/bin/bash
python3 - <<'PY'
from fractions import Fraction
data = open("/app/system.txt").read().split("\n")
n = int(data[0])
a = [[Fraction(v) for v in data[1 + i].split()] for i in range(n)]
sign, det = 1, Fraction(1)
for col in range(n):
    piv = max(range(col, n), key=lambda r: abs(a[r][col]))
    if piv != col:
        a[col], a[piv] = a[piv], a[col]
        sign = -sign
    det *= a[col][col]
    for r in range(col + 1, n):
        f = a[r][col] / a[col][col]
        a[r] = [u - f * v for u, v in zip(a[r], a[col])]
x = [Fraction(0)] * n
for i in reversed(range(n)):
    x[i] = (a[i][n] - sum(a[i][j] * x[j] for j in range(i + 1, n))) / a[i][i]
open("/app/x.txt", "w").write("".join(f"{float(v)!r}\n" for v in x))
open("/app/det.txt", "w").write(f"{sign * det}\n")
PY
