import random

rng = random.Random(8127)
centers = [(rng.uniform(-50, 50), rng.uniform(-50, 50)) for _ in range(6)]
with open("/app/points.csv", "w") as f:
    f.write("x,y\n")
    for _ in range(900):
        cx, cy = rng.choice(centers)
        f.write(f"{rng.gauss(cx, 9):.4f},{rng.gauss(cy, 9):.4f}\n")
