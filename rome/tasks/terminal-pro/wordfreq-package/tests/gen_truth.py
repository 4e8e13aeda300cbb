import random

rng = random.Random(8112)
words = ["Straße", "café", "naïve", "data", "Data", "DATA", "über", "kernel", "ship", "it's", "co-op",
         "année", "ÉCOLE", "école", "zebra", "alpha", "mañana", "rock", "roll", "x11", "v2"]
lines = []
for _ in range(400):
    lines.append(" ".join(rng.choice(words) + rng.choice(["", ",", ".", "!", ";", " --"]) for _ in range(12)))
open("/app/corpus.txt", "w", encoding="utf-8").write("\n".join(lines) + "\n")
