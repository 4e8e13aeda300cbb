#!/bin/bash
python3 - <<'PY'
import string
ENG = [8.2, 1.5, 2.8, 4.3, 12.7, 2.2, 2.0, 6.1, 7.0, 0.15, 0.77, 4.0, 2.4, 6.7, 7.5, 1.9, 0.095, 6.0, 6.3, 9.1,
       2.8, 0.98, 2.4, 0.15, 2.0, 0.074]
text = open("/app/intercept.txt").read()
letters = [c for c in text if c in string.ascii_uppercase]
def ioc(seq):
    n = len(seq)
    return sum(seq.count(ch) * (seq.count(ch) - 1) for ch in set(seq)) / (n * (n - 1))
def best_shift(col):
    def chi(s):
        counts = [0] * 26
        for c in col:
            counts[(ord(c) - 65 - s) % 26] += 1
        return sum((counts[i] - len(col) * ENG[i] / 100) ** 2 / (len(col) * ENG[i] / 100) for i in range(26))
    return min(range(26), key=chi)
scores = {L: sum(ioc(letters[i::L]) for i in range(L)) / L for L in range(5, 10)}
length = min(L for L in scores if scores[L] > 0.058) if any(v > 0.058 for v in scores.values()) else max(scores, key=scores.get)
key = "".join(chr(65 + best_shift(letters[i::length])) for i in range(length))
for L in range(1, len(key)):
    if len(key) % L == 0 and key == key[:L] * (len(key) // L):
        key = key[:L]
        break
out, i = [], 0
for ch in text:
    if ch in string.ascii_uppercase:
        out.append(chr((ord(ch) - ord(key[i % len(key)])) % 26 + 65))
        i += 1
    else:
        out.append(ch)
open("/app/key.txt", "w").write(key + "\n")
open("/app/plaintext.txt", "w").write("".join(out))
PY
