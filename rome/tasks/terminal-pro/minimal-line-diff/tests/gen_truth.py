import random

rng = random.Random(8124)
words = ["alpha", "beta", "gamma", "delta", "return x", "}", "{", "", "pass", "x += 1"]
old = [rng.choice(words) + (str(rng.randint(0, 3)) if rng.random() < 0.5 else "") for _ in range(1200)]
new = list(old)
for _ in range(150):
    i = rng.randrange(len(new))
    op = rng.random()
    if op < 0.4:
        del new[i]
    elif op < 0.8:
        new.insert(i, rng.choice(words) + "*")
    else:
        new[i] = new[i] + " changed"
open("/app/old.txt", "w").write("\n".join(old) + "\n")
open("/app/new.txt", "w").write("\n".join(new) + "\n")
