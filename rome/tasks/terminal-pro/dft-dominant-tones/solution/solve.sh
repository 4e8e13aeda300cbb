#!/bin/bash
python3 - <<'PY'
import cmath, json, math
xs = [float(l) for l in open("/app/signal.txt") if l.strip()]
def fft(a):
    n = len(a)
    if n == 1:
        return a
    even, odd = fft(a[0::2]), fft(a[1::2])
    w = [cmath.exp(-2j * math.pi * k / n) * odd[k] for k in range(n // 2)]
    return [even[k] + w[k] for k in range(n // 2)] + [even[k] - w[k] for k in range(n // 2)]
X = fft([complex(x) for x in xs])
N = len(xs)
amps = {k: 2 * abs(X[k]) / N for k in range(1, N // 2)}
best = sorted(amps, key=lambda k: -amps[k])[:4]
json.dump([{"hz": k, "amplitude": round(amps[k], 6)} for k in best], open("/app/tones.json", "w"))
open("/app/offset.txt", "w").write(f"{sum(xs) / N:.9f}\n")
PY
