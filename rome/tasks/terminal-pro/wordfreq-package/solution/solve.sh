#!/bin/bash
cat > /app/wordfreq/__init__.py <<'PY'
"""Word frequencies of a text file."""
DEFAULT_TOP = 10
PY
cat > /app/wordfreq/tokenize.py <<'PY'
def words(text):
    out, cur = [], []
    for ch in text:
        if ch.isalpha():
            cur.append(ch)
        elif cur:
            out.append("".join(cur).casefold())
            cur = []
    if cur:
        out.append("".join(cur).casefold())
    return out
PY
cat > /app/wordfreq/count.py <<'PY'
from collections import Counter

from wordfreq import DEFAULT_TOP
from wordfreq.tokenize import words


def top_words(text, n=DEFAULT_TOP):
    counts = Counter(words(text))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
PY
cat > /app/wordfreq/__main__.py <<'PY'
import sys

from wordfreq import DEFAULT_TOP
from wordfreq.count import top_words


def main(argv):
    path = argv[0]
    n = int(argv[argv.index("--top") + 1]) if "--top" in argv else DEFAULT_TOP
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for word, count in top_words(text, n):
        print(word, count)


main(sys.argv[1:])
PY
