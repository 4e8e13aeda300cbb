import csv
import random

rng = random.Random(8110)
with open("/app/transactions.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["date", "account", "kind", "amount"])
    for i in range(2500):
        amt = rng.randint(1, 500000) / 100
        text = f"{amt:,.2f}" if rng.random() < 0.2 else f"{amt:.2f}"
        w.writerow([f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                    rng.choice(["ACC-%03d" % n for n in range(1, 15)]),
                    rng.choice(["deposit", "withdrawal", "fee", "refund", "deposit", "memo"]), text])
