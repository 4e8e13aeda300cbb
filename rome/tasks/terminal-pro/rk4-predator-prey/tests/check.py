import json
import sys

p = json.load(open("/app/params.json"))


def f(x, y):
    return p["alpha"] * x - p["beta"] * x * y, p["delta"] * x * y - p["gamma"] * y


x, y, h = p["x0"], p["y0"], p["dt"]
xs = [x]
for _ in range(p["steps"]):
    k1 = f(x, y)
    k2 = f(x + h / 2 * k1[0], y + h / 2 * k1[1])
    k3 = f(x + h / 2 * k2[0], y + h / 2 * k2[1])
    k4 = f(x + h * k3[0], y + h * k3[1])
    x += h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
    y += h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    xs.append(x)
peaks = [i for i in range(1, len(xs) - 1) if xs[i - 1] < xs[i] > xs[i + 1]]
try:
    final = json.load(open("/app/final.json"))
    got_peaks = [int(l) for l in open("/app/prey_peaks.txt") if l.strip()]
except (OSError, ValueError) as exc:
    sys.exit(f"cannot read outputs: {exc}")
for key, want in (("t", p["steps"] * h), ("x", x), ("y", y)):
    if abs(float(final.get(key, "nan")) - want) > 1e-7 * max(1.0, abs(want)):
        sys.exit(f"final {key} = {final.get(key)}, expected {want}")
if got_peaks != peaks:
    sys.exit(f"prey peaks {got_peaks}, expected {peaks}")
print("rk4 ok")
