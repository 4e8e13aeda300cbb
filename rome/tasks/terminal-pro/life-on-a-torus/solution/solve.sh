#!/bin/bash
python3 - <<'PY'
b = [l.strip() for l in open("/app/board.txt") if l.strip()]
H, W = len(b), len(b[0])
g = [[ch == "#" for ch in row] for row in b]
pops = []
for _ in range(137):
    n = [[sum(g[(r + dr) % H][(c + dc) % W] for dr in (-1, 0, 1) for dc in (-1, 0, 1) if dr or dc)
          for c in range(W)] for r in range(H)]
    g = [[n[r][c] == 3 or (g[r][c] and n[r][c] == 2) for c in range(W)] for r in range(H)]
    pops.append(sum(map(sum, g)))
open("/app/board_137.txt", "w").write("\n".join("".join("#" if v else "." for v in row) for row in g) + "\n")
open("/app/population.txt", "w").write("\n".join(map(str, pops)) + "\n")
PY
