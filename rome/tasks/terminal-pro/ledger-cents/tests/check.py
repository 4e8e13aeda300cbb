import csv
import random
import subprocess
import sys
from decimal import Decimal


def expected(path):
    bal = {}
    for row in csv.DictReader(open(path)):
        sign = {"deposit": 1, "refund": 1, "withdrawal": -1, "fee": -1}.get(row["kind"])
        if sign is None:
            continue
        bal[row["account"]] = bal.get(row["account"], Decimal(0)) + sign * Decimal(row["amount"].replace(",", ""))
    return [f"{a} {b:.2f}" for a, b in sorted(bal.items())]


rng = random.Random(77)
with open("/tmp/hidden.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["date", "account", "kind", "amount"])
    for _ in range(700):
        amt = rng.randint(1, 9999999) / 100
        w.writerow(["2026-01-01", rng.choice(["zeta", "alpha", "Mid", "beta-2"]),
                    rng.choice(["deposit", "withdrawal", "fee", "refund", "transfer"]), f"{amt:,.2f}"])
for path in ("/app/transactions.csv", "/tmp/hidden.csv"):
    run = subprocess.run([sys.executable, "/app/ledger.py", path], capture_output=True, text=True, timeout=60)
    got = run.stdout.strip().splitlines()
    want = expected(path)
    if got != want:
        sys.exit(f"{path}: output differs (exit {run.returncode}): got {got[:3]}, expected {want[:3]} {run.stderr[-300:]}")
print("ledger ok")
