import random

rng = random.Random(8119)
n = 24
rows = []
for i in range(n):
    row = [rng.randint(-9, 9) for _ in range(n)]
    row[i] = 0  # a zero on the diagonal: elimination without pivoting breaks down
    rows.append(row + [rng.randint(-50, 50)])
with open("/app/system.txt", "w") as f:
    f.write(f"{n}\n")
    for row in rows:
        f.write(" ".join(map(str, row)) + "\n")
