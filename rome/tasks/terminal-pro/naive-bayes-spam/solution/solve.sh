#!/bin/bash
python3 - <<'PY'
import glob, math, os
from collections import Counter
counts, docs = {}, {}
for kind in ("spam", "ham"):
    files = glob.glob(f"/app/train/{kind}/*.txt")
    docs[kind] = len(files)
    counts[kind] = Counter(w for f in files for w in open(f).read().lower().split())
vocab = set(counts["spam"]) | set(counts["ham"])
total = {k: sum(c.values()) for k, c in counts.items()}
def score(text, kind):
    s = math.log(docs[kind] / sum(docs.values()))
    for w in text.lower().split():
        s += math.log((counts[kind][w] + 1) / (total[kind] + len(vocab)))
    return s
with open("/app/labels.csv", "w") as out:
    out.write("file,label\n")
    for f in sorted(glob.glob("/app/inbox/*.txt")):
        text = open(f).read()
        out.write(f"{os.path.basename(f)},{max(('spam', 'ham'), key=lambda k: score(text, k))}\n")
PY
