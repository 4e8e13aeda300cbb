import random

rng = random.Random(8123)
t = 0.0
with open("/app/traffic.csv", "w") as f:
    f.write("now,cost\n")
    for _ in range(3000):
        t += rng.choice([0.0, 0.01, 0.05, 0.1, 0.25, 1.0, 0.125])
        f.write(f"{t:.3f},{rng.choice([1, 1, 1, 2, 5])}\n")
