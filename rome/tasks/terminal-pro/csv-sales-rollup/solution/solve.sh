#!/bin/bash
python3 - <<'PY'
import csv, json
from decimal import Decimal
totals = {}
for row in csv.DictReader(open("/app/sales.csv")):
    totals.setdefault(row["region"], Decimal(0))
    if row["status"] == "complete":
        totals[row["region"]] += int(row["units"]) * Decimal(row["unit_price"])
json.dump({k: float(round(v, 2)) for k, v in totals.items()}, open("/app/revenue.json", "w"), indent=2)
PY
