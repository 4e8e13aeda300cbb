import csv
import sys

SIGN = {"deposit": 1, "withdrawal": -1, "fee": -1, "refund": -1}


def main(path):
    balances = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            sign = SIGN.get(row["kind"], 1)
            balances[row["account"]] = balances.get(row["account"], 0.0) + sign * float(row["amount"])
    for account, balance in sorted(balances.items(), key=lambda kv: kv[1]):
        print(account, round(balance, 2))


if __name__ == "__main__":
    main(sys.argv[1])
