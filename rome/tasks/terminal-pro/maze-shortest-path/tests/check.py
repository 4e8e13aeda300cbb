import sys
from collections import deque

grid = [l.rstrip("\n") for l in open("/app/maze.txt")]
find = lambda ch: next((r, row.index(ch)) for r, row in enumerate(grid) if ch in row)
start, end = find("S"), find("E")
dist = {start: 0}
queue = deque([start])
while queue:
    r, c = queue.popleft()
    for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        n = (r + dr, c + dc)
        if n not in dist and grid[n[0]][n[1]] != "#":
            dist[n] = dist[(r, c)] + 1
            queue.append(n)
try:
    moves = open("/app/moves.txt").read().strip()
    steps = int(open("/app/steps.txt").read().strip())
except (OSError, ValueError) as exc:
    sys.exit(f"cannot read moves/steps: {exc}")
pos = start
for m in moves:
    dr, dc = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}.get(m, (None, None))
    if dr is None:
        sys.exit(f"bad move {m!r}")
    pos = (pos[0] + dr, pos[1] + dc)
    if grid[pos[0]][pos[1]] == "#":
        sys.exit(f"walks into a wall at {pos}")
if pos != end:
    sys.exit(f"ends at {pos}, not at E {end}")
if len(moves) != dist[end] or steps != dist[end]:
    sys.exit(f"{len(moves)} moves / steps.txt {steps}; shortest is {dist[end]}")
print("maze ok")
