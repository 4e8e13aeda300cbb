#!/bin/bash
cat > /app/ledger.py <<'PY'
import csv
import sys
from decimal import Decimal

SIGN = {"deposit": 1, "refund": 1, "withdrawal": -1, "fee": -1}


def main(path):
    balances = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            sign = SIGN.get(row["kind"])
            if sign is None:
                continue
            amount = Decimal(row["amount"].replace(",", ""))
            balances[row["account"]] = balances.get(row["account"], Decimal(0)) + sign * amount
    for account, balance in sorted(balances.items()):
        print(account, f"{balance:.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
PY
