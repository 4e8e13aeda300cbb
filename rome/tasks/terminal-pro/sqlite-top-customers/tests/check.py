import csv
import sqlite3
import sys
from fractions import Fraction

db = sqlite3.connect("file:/app/shop.db?mode=ro", uri=True)
spend: dict[int, Fraction] = {}
orders: dict[int, set] = {}
for oid, cid, status in db.execute("SELECT id, customer_id, status FROM orders WHERE placed_at LIKE '2025-%'"):
    if status == "cancelled":
        continue
    orders.setdefault(cid, set()).add(oid)
    spend.setdefault(cid, Fraction(0))
    for qty, cents, disc in db.execute(
        "SELECT qty, unit_cents, discount_pct FROM order_items WHERE order_id=?", (oid,)
    ):
        spend[cid] += Fraction(qty * cents * (100 - disc), 100)
top = sorted(spend, key=lambda c: (-spend[c], c))[:10]
names = dict((i, (n, c)) for i, n, c in db.execute("SELECT id, name, country FROM customers"))
try:
    rows = list(csv.reader(open("/app/top_customers.csv")))
except OSError as exc:
    sys.exit(f"cannot read /app/top_customers.csv: {exc}")
if rows[:1] != [["customer_id", "name", "country", "orders", "spend"]]:
    sys.exit(f"bad header {rows[:1]}")
if len(rows) != 11:
    sys.exit(f"expected 10 rows, got {len(rows) - 1}")
for row, cid in zip(rows[1:], top):
    want = [str(cid), *names[cid], str(len(orders[cid]))]
    if row[:4] != want or abs(float(row[4]) - float(spend[cid] / 100)) > 0.0051:
        sys.exit(f"row {row} differs from expected {want + [f'{float(spend[cid] / 100):.2f}']}")
print("top customers ok")
