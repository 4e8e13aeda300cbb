import csv
import json
import sys
from decimal import Decimal

expected: dict[str, Decimal] = {}
with open("/app/sales.csv") as f:
    for row in csv.DictReader(f):
        expected.setdefault(row["region"], Decimal(0))
        if row["status"] == "complete":
            expected[row["region"]] += int(row["units"]) * Decimal(row["unit_price"])
try:
    got = json.load(open("/app/revenue.json"))
except (OSError, ValueError) as exc:
    sys.exit(f"cannot read /app/revenue.json: {exc}")
if set(got) != set(expected):
    sys.exit(f"regions differ: got {sorted(got)}, expected {sorted(expected)}")
for region, total in expected.items():
    if abs(float(got[region]) - float(round(total, 2))) > 0.005:
        sys.exit(f"{region}: got {got[region]}, expected {round(total, 2)}")
print("revenue ok")
