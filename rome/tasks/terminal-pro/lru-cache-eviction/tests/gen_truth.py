import random

rng = random.Random(8111)
with open("/app/workload.txt", "w") as f:
    for _ in range(2000):
        k = f"k{int(rng.paretovariate(1.2)) % 40}"
        f.write(f"put {k} {rng.randint(0, 999)}\n" if rng.random() < 0.45 else f"get {k}\n")
