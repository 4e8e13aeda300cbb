import random
import subprocess
import sys
from collections import Counter


def expected(text, n):
    words, cur = [], []
    for ch in text + " ":
        if ch.isalpha():
            cur.append(ch)
        elif cur:
            words.append("".join(cur).casefold())
            cur = []
    counts = Counter(words)
    return [f"{w} {c}" for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


rng = random.Random(5)
vocab = ["Ωmega", "ωmega", "STRASSE", "straße", "Ärger", "ärger", "tab\tword", "new\nline", "o'neil", "42nd"]
hidden = "\n".join(" ".join(rng.choice(vocab) for _ in range(9)) for _ in range(120))
open("/tmp/hidden.txt", "w", encoding="utf-8").write(hidden)
cases = [("/app/corpus.txt", None), ("/app/corpus.txt", 25), ("/tmp/hidden.txt", 7), ("/tmp/hidden.txt", 500)]
for path, n in cases:
    args = [sys.executable, "-m", "wordfreq", path] + (["--top", str(n)] if n else [])
    run = subprocess.run(args, cwd="/app", capture_output=True, text=True, timeout=60,
                         env={"PYTHONIOENCODING": "utf-8", "PATH": "/usr/bin:/bin"})
    want = expected(open(path, encoding="utf-8").read(), n or 10)
    got = run.stdout.strip().splitlines()
    if got != want:
        sys.exit(f"{' '.join(args[2:])}: got {got[:4]} (exit {run.returncode}) expected {want[:4]} {run.stderr[-400:]}")
print("wordfreq ok")
