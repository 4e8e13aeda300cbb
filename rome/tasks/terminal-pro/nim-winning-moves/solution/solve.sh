#!/bin/bash
python3 - <<'PY'
out = []
for line in open("/app/positions.txt"):
    heaps = list(map(int, line.split()))
    if not heaps:
        continue
    x = 0
    for h in heaps:
        x ^= h
    if x == 0:
        out.append("LOSE")
    else:
        i = next(i for i, h in enumerate(heaps) if h ^ x < h)
        out.append(f"{i} {heaps[i] - (heaps[i] ^ x)}")
open("/app/moves.txt", "w").write("\n".join(out) + "\n")
PY
