import math
import random

rng = random.Random(8120)
freqs = rng.sample(range(7, 480), 6)
amps = sorted((round(rng.uniform(0.3, 3.0), 2) for _ in freqs), reverse=True)
offset = rng.uniform(-2, 2)
with open("/app/signal.txt", "w") as f:
    for n in range(1024):
        t = n / 1024
        v = offset + sum(a * math.sin(2 * math.pi * fr * t + fr) for a, fr in zip(amps, freqs))
        f.write(f"{v + rng.gauss(0, 0.2):.6f}\n")
