import os
import random

rng = random.Random(8128)
common = "the a to and of you your for is on this in with we at be our it".split()
spam_w = "free winner prize claim urgent offer cash credit click limited bonus viagra loan deal".split()
ham_w = "meeting lunch project report schedule tomorrow review thanks family weekend notes draft".split()
both = "account update please today new info time call".split()


def message(kind):
    vocab = spam_w if kind == "spam" else ham_w
    other = ham_w if kind == "spam" else spam_w
    n = rng.randint(8, 40)
    words = [rng.choice(common + both) if rng.random() < 0.55
             else rng.choice(vocab) if rng.random() < 0.85 else rng.choice(other) for _ in range(n)]
    return " ".join(w.upper() if rng.random() < 0.1 else w for w in words) + "\n"


for kind in ("spam", "ham"):
    os.makedirs(f"/app/train/{kind}", exist_ok=True)
    for i in range(150):
        open(f"/app/train/{kind}/{i:04d}.txt", "w").write(message(kind))
os.makedirs("/app/inbox", exist_ok=True)
truth = []
for i in range(300):
    kind = rng.choice(["spam", "ham"])
    open(f"/app/inbox/m{i:04d}.txt", "w").write(message(kind))
    truth.append(kind)
# The truth is not stored in the image: the tests regenerate it from the same seed (see tests/check.py).
