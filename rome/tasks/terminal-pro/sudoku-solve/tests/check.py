import sys

puzzles = [l.strip() for l in open("/app/puzzles.txt") if l.strip()]
try:
    sols = [l.strip() for l in open("/app/solutions.txt") if l.strip()]
except OSError as exc:
    sys.exit(f"cannot read /app/solutions.txt: {exc}")
if len(sols) != len(puzzles):
    sys.exit(f"{len(sols)} solutions for {len(puzzles)} puzzles")
full = set("123456789")
for n, (p, s) in enumerate(zip(puzzles, sols)):
    if len(s) != 81 or set(s) - full:
        sys.exit(f"solution {n} is not 81 digits")
    if any(a != "." and a != b for a, b in zip(p, s)):
        sys.exit(f"solution {n} changes a given digit")
    units = [[r * 9 + c for c in range(9)] for r in range(9)] + [[r * 9 + c for r in range(9)] for c in range(9)]
    units += [[(br + r) * 9 + bc + c for r in range(3) for c in range(3)] for br in (0, 3, 6) for bc in (0, 3, 6)]
    if any({s[i] for i in u} != full for u in units):
        sys.exit(f"solution {n} breaks a row, column or box")
print("sudoku ok")
