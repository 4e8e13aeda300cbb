import hashlib
import random
import string

rng = random.Random(8131)
syll = ["ka", "lo", "mi", "zu", "re", "ta", "no", "vi", "sha", "pe", "dor", "lin", "qua", "ex", "om"]
words = sorted({"".join(rng.choice(syll) for _ in range(rng.randint(2, 4))) for _ in range(3000)})
open("/app/wordlist.txt", "w").write("\n".join(words) + "\n")
truth = {}
with open("/app/shadow.txt", "w") as f:
    for i in range(40):
        user = f"{rng.choice(['ann', 'raj', 'li', 'tom', 'eva', 'kim', 'joe'])}{i:02d}"
        if rng.random() < 0.75:
            pw = rng.choice(words)
            if rng.random() < 0.5:
                pw = pw[0].upper() + pw[1:]
            pw += rng.choice(["", "", str(rng.randint(0, 9)), "!"])
            truth[user] = pw
        else:
            pw = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(12))
        salt = "%08x" % rng.getrandbits(32)
        f.write(f"{user}:sha256${salt}${hashlib.sha256((salt + pw).encode()).hexdigest()}\n")
