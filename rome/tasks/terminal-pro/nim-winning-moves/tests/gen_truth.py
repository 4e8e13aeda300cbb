import random

rng = random.Random(8107)
with open("/app/positions.txt", "w") as f:
    for _ in range(300):
        heaps = [rng.randint(1, 60) for _ in range(rng.randint(2, 6))]
        if rng.random() < 0.25 and len(heaps) > 2:
            x = 0
            for h in heaps[:-1]:
                x ^= h
            if x:
                heaps[-1] = x
        f.write(" ".join(map(str, heaps)) + "\n")
