import random

rng = random.Random(8105)


def full_grid():
    base = [[(3 * (r % 3) + r // 3 + c) % 9 + 1 for c in range(9)] for r in range(9)]
    digits = list(range(1, 10))
    rng.shuffle(digits)
    grid = [[digits[v - 1] for v in row] for row in base]
    bands = [0, 1, 2]
    rng.shuffle(bands)
    rows = [b * 3 + r for b in bands for r in rng.sample(range(3), 3)]
    stacks = [0, 1, 2]
    rng.shuffle(stacks)
    cols = [s * 3 + c for s in stacks for c in rng.sample(range(3), 3)]
    return [[grid[r][c] for c in cols] for r in rows]


with open("/app/puzzles.txt", "w") as f:
    for holes in (40, 45, 50, 52, 54, 55):
        cells = [str(v) for row in full_grid() for v in row]
        for i in rng.sample(range(81), holes):
            cells[i] = "."
        f.write("".join(cells) + "\n")
