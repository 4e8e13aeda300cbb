import random

rng = random.Random(8108)
rows = ["".join("#" if rng.random() < 0.33 else "." for _ in range(48)) for _ in range(36)]
open("/app/board.txt", "w").write("\n".join(rows) + "\n")
