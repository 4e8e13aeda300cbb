#!/bin/bash
python3 - <<'PY'
def solve(g):
    try:
        i = g.index(".")
    except ValueError:
        return g
    r, c = divmod(i, 9)
    used = {g[r * 9 + k] for k in range(9)} | {g[k * 9 + c] for k in range(9)}
    br, bc = r - r % 3, c - c % 3
    used |= {g[(br + a) * 9 + bc + b] for a in range(3) for b in range(3)}
    for d in "123456789":
        if d not in used:
            g[i] = d
            if solve(g):
                return g
    g[i] = "."
    return None
out = ["".join(solve(list(l.strip()))) for l in open("/app/puzzles.txt") if l.strip()]
open("/app/solutions.txt", "w").write("\n".join(out) + "\n")
PY
