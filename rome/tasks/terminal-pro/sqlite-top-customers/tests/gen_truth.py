import random
import sqlite3

rng = random.Random(8104)
db = sqlite3.connect("/app/shop.db")
db.executescript("""
CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, country TEXT);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER, placed_at TEXT, status TEXT);
CREATE TABLE order_items(order_id INTEGER, sku TEXT, qty INTEGER, unit_cents INTEGER, discount_pct INTEGER);
""")
for cid in range(1, 121):
    db.execute("INSERT INTO customers VALUES (?,?,?)",
               (cid, f"customer-{rng.randint(1000, 9999)}", rng.choice(["DE", "FR", "US", "JP", "BR"])))
oid = 0
for _ in range(1500):
    oid += 1
    year = rng.choice([2024, 2025, 2025, 2026])
    placed = f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:00:00"
    db.execute("INSERT INTO orders VALUES (?,?,?,?)", (oid, rng.randint(1, 120), placed,
               rng.choice(["paid", "paid", "shipped", "cancelled", "refund_requested"])))
    for _ in range(rng.choice([0, 1, 2, 3, 4])):
        db.execute("INSERT INTO order_items VALUES (?,?,?,?,?)", (oid, f"SKU{rng.randint(1, 60)}",
                   rng.randint(1, 5), rng.randint(199, 25000), rng.choice([0, 0, 5, 10, 25])))
db.commit()
