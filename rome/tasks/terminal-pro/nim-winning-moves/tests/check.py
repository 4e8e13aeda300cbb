import sys
from functools import reduce
from operator import xor

positions = [list(map(int, l.split())) for l in open("/app/positions.txt") if l.strip()]
try:
    answers = [l.strip() for l in open("/app/moves.txt") if l.strip()]
except OSError as exc:
    sys.exit(f"cannot read /app/moves.txt: {exc}")
if len(answers) != len(positions):
    sys.exit(f"{len(answers)} answers for {len(positions)} positions")
for n, (heaps, ans) in enumerate(zip(positions, answers)):
    x = reduce(xor, heaps)
    if x == 0:
        if ans != "LOSE":
            sys.exit(f"position {n} {heaps} is lost, got {ans!r}")
        continue
    want = next(i for i, h in enumerate(heaps) if h ^ x < h)
    expected = f"{want} {heaps[want] - (heaps[want] ^ x)}"
    if ans != expected:
        sys.exit(f"position {n} {heaps}: got {ans!r}, expected {expected!r}")
print("nim ok")
