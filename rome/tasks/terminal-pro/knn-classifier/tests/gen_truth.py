import random

rng = random.Random(8125)
centers = {"setosa": (1, 8, 30, 0.2), "versicolor": (2, 6, 45, 0.5), "virginica": (2.6, 7, 55, 0.45)}
with open("/app/train.csv", "w") as f:
    f.write("f1,f2,f3,f4,label\n")
    for _ in range(300):
        lab = rng.choice(list(centers))
        c = centers[lab]
        f.write(",".join(f"{rng.gauss(m, s):.3f}" for m, s in zip(c, (0.5, 1.5, 8, 0.12))) + f",{lab}\n")
with open("/app/test.csv", "w") as f:
    f.write("id,f1,f2,f3,f4\n")
    for i in range(120):
        c = centers[rng.choice(list(centers))]
        f.write(f"t{i:03d}," + ",".join(f"{rng.gauss(m, s):.3f}" for m, s in zip(c, (0.5, 1.5, 8, 0.12))) + "\n")
