import random

rng = random.Random(8106)
H, W = 41, 61
g = [["#"] * W for _ in range(H)]
stack = [(1, 1)]
g[1][1] = " "
while stack:
    r, c = stack[-1]
    nbrs = [(r + dr, c + dc, dr, dc) for dr, dc in ((2, 0), (-2, 0), (0, 2), (0, -2))
            if 0 < r + dr < H - 1 and 0 < c + dc < W - 1 and g[r + dr][c + dc] == "#"]
    if not nbrs:
        stack.pop()
        continue
    nr, nc, dr, dc = rng.choice(nbrs)
    g[r + dr // 2][c + dc // 2] = " "
    g[nr][nc] = " "
    stack.append((nr, nc))
for _ in range(90):  # open extra walls so there are loops and the first path found is rarely the shortest
    r, c = rng.randrange(1, H - 1), rng.randrange(1, W - 1)
    if (r % 2) != (c % 2):
        g[r][c] = " "
g[1][1], g[H - 2][W - 2] = "S", "E"
open("/app/maze.txt", "w").write("\n".join("".join(row) for row in g) + "\n")
