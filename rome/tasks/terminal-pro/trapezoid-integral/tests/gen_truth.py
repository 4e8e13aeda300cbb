import math
import random

rng = random.Random(8117)
xs = sorted(rng.uniform(0, 12) for _ in range(700))
rows = [(x, math.sin(x) * math.exp(-x / 7) + 0.3 * math.cos(3 * x) + rng.gauss(0, 0.01)) for x in xs]
rows += [(x, y + rng.gauss(0, 0.05)) for x, y in rng.sample(rows, 40)]
rng.shuffle(rows)
with open("/app/samples.csv", "w") as f:
    f.write("x,y\n")
    for x, y in rows:
        f.write(f"{x!r},{y!r}\n")
