import csv
import random

rng = random.Random(8101)
regions = ["north", "south", "east", "west", "central", "islands"]
products = ["widget", "gadget", "doohickey", "sprocket", "gizmo"]
statuses = ["complete"] * 7 + ["refunded", "pending", "cancelled"]
with open("/app/sales.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["order_id", "region", "product", "units", "unit_price", "status"])
    for i in range(1, 801):
        region = rng.choice(regions[:5]) if i > 1 else "islands"
        status = "cancelled" if region == "islands" else rng.choice(statuses)
        w.writerow([f"O{i:05d}", region, rng.choice(products), rng.randint(1, 40),
                    f"{rng.uniform(0.5, 99.99):.2f}", status])
