import math
import random

rng = random.Random(8126)
true_w = [rng.uniform(-2, 2) for _ in range(3)]
with open("/app/data.csv", "w") as f:
    f.write("x1,x2,x3,y\n")
    for _ in range(400):
        x = [rng.gauss(10, 3), rng.gauss(-2, 0.5), rng.uniform(0, 100)]
        z = 0.4 + sum(w * (v - m) / s for w, v, m, s in zip(true_w, x, (10, -2, 50), (3, 0.5, 29)))
        y = 1 if rng.random() < 1 / (1 + math.exp(-z)) else 0
        f.write(f"{x[0]:.4f},{x[1]:.4f},{x[2]:.4f},{y}\n")
