import random
import subprocess
import sys


def lcs_len(a, b):
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def check(old, new, out, label):
    a, b = [], []
    for line in out:
        tag, text = line[:2], line[2:]
        if tag not in ("  ", "- ", "+ "):
            sys.exit(f"{label}: bad line {line!r}")
        if tag != "+ ":
            a.append(text)
        if tag != "- ":
            b.append(text)
    if a != old or b != new:
        sys.exit(f"{label}: the diff does not turn OLD into NEW")
    kept = sum(1 for l in out if l.startswith("  "))
    if kept != lcs_len(old, new):
        sys.exit(f"{label}: keeps {kept} lines, a minimal diff keeps {lcs_len(old, new)}")
    for i in range(len(out) - 1):
        if out[i].startswith("+ ") and out[i + 1].startswith("- "):
            sys.exit(f"{label}: an addition precedes a removal at output line {i}")


rng = random.Random(31337)
pairs = [("/app/old.txt", "/app/new.txt")]
for n in range(6):
    alphabet = ["a", "b", "c", "d", "", "b"][: rng.randint(2, 6)]
    old = [rng.choice(alphabet) for _ in range(rng.randint(0, 60))]
    new = [rng.choice(alphabet) for _ in range(rng.randint(0, 60))]
    open(f"/tmp/o{n}", "w").write("".join(l + "\n" for l in old))
    open(f"/tmp/n{n}", "w").write("".join(l + "\n" for l in new))
    pairs.append((f"/tmp/o{n}", f"/tmp/n{n}"))
for o, n in pairs:
    run = subprocess.run([sys.executable, "/app/mindiff.py", o, n], capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        sys.exit(f"{o} {n}: exit {run.returncode}: {run.stderr[-400:]}")
    check(open(o).read().splitlines(), open(n).read().splitlines(), run.stdout.splitlines(), f"{o} vs {n}")
print("mindiff ok")
