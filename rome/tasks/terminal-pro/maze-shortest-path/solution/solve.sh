#!/bin/bash
python3 - <<'PY'
from collections import deque
grid = [l.rstrip("\n") for l in open("/app/maze.txt")]
start = next((r, row.index("S")) for r, row in enumerate(grid) if "S" in row)
prev = {start: None}
q = deque([start])
while q:
    cur = q.popleft()
    if grid[cur[0]][cur[1]] == "E":
        break
    for m, (dr, dc) in {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}.items():
        n = (cur[0] + dr, cur[1] + dc)
        if n not in prev and grid[n[0]][n[1]] != "#":
            prev[n] = (cur, m)
            q.append(n)
path = []
while prev[cur]:
    cur, m = prev[cur]
    path.append(m)
moves = "".join(reversed(path))
open("/app/moves.txt", "w").write(moves + "\n")
open("/app/steps.txt", "w").write(f"{len(moves)}\n")
PY
