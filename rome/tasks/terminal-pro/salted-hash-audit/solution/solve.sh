#!/bin/bash
python3 - <<'PY'
import hashlib
words = [w.strip() for w in open("/app/wordlist.txt") if w.strip()]
cands = []
for w in words:
    for base in {w, w[0].upper() + w[1:]}:
        cands += [base + s for s in ["", "!"] + [str(d) for d in range(10)]]
found = {}
for line in open("/app/shadow.txt"):
    user, spec = line.strip().split(":", 1)
    _, salt, digest = spec.split("$")
    for pw in cands:
        if hashlib.sha256((salt + pw).encode()).hexdigest() == digest:
            found[user] = pw
            break
open("/app/cracked.txt", "w").write("".join(f"{u}:{found[u]}\n" for u in sorted(found)))
PY
