#!/bin/bash
python3 - <<'PY'
import csv, sqlite3
db = sqlite3.connect("/app/shop.db")
rows = db.execute("""
SELECT c.id, c.name, c.country, COUNT(DISTINCT o.id),
       COALESCE(SUM(i.qty * i.unit_cents * (100 - i.discount_pct)), 0) AS spend_x100
FROM customers c JOIN orders o ON o.customer_id = c.id
LEFT JOIN order_items i ON i.order_id = o.id
WHERE o.placed_at >= '2025-01-01' AND o.placed_at < '2026-01-01' AND o.status != 'cancelled'
GROUP BY c.id ORDER BY spend_x100 DESC, c.id ASC LIMIT 10
""").fetchall()
with open("/app/top_customers.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["customer_id", "name", "country", "orders", "spend"])
    for cid, name, country, n, s in rows:
        w.writerow([cid, name, country, n, f"{s / 10000:.2f}"])
PY
