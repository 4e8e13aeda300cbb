import cmath
import json
import math
import sys

xs = [float(l) for l in open("/app/signal.txt") if l.strip()]
N = len(xs)
tw = [cmath.exp(-2j * math.pi * k / N) for k in range(N)]
amp = {}
for k in range(1, N // 2):
    s = sum(x * tw[(k * n) % N] for n, x in enumerate(xs))
    amp[k] = 2 * abs(s) / N
top = sorted(amp, key=lambda k: -amp[k])[:4]
try:
    got = json.load(open("/app/tones.json"))
    offset = float(open("/app/offset.txt").read().strip())
except (OSError, ValueError) as exc:
    sys.exit(f"cannot read outputs: {exc}")
if [g.get("hz") for g in got] != top:
    sys.exit(f"tones {[g.get('hz') for g in got]}, expected {top}")
for g in got:
    if abs(float(g["amplitude"]) - amp[g["hz"]]) > 0.01:
        sys.exit(f"{g['hz']} Hz amplitude {g['amplitude']}, expected {amp[g['hz']]:.4f}")
if abs(offset - sum(xs) / N) > 1e-6:
    sys.exit(f"offset {offset}, expected {sum(xs) / N}")
print("tones ok")
