import random

rng = random.Random(8121)
pre = ["", "", "", "-alpha", "-alpha.1", "-alpha.beta", "-beta", "-beta.2", "-beta.11", "-rc.1", "-rc.1.5", "-0.3.7",
       "-x.7.z.92", "-alpha.10", "-1", "-11"]
lines = []
for _ in range(220):
    v = f"{rng.randint(0, 3)}.{rng.randint(0, 12)}.{rng.randint(0, 20)}{rng.choice(pre)}"
    if rng.random() < 0.15:
        v += f"+build.{rng.randint(1, 99)}"
    lines.append(("v" if rng.random() < 0.2 else "") + v)
open("/app/versions.txt", "w").write("\n".join(lines) + "\n")
